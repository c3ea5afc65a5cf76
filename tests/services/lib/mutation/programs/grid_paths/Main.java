import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String[] first = in.readLine().trim().split(" ");
        int h = Integer.parseInt(first[0]);
        int w = Integer.parseInt(first[1]);
        char[][] g = new char[h][];
        for (int i = 0; i < h; i++) g[i] = in.readLine().trim().toCharArray();
        final long mod = 1000000007L;
        long[][] dp = new long[h][w];
        for (int i = 0; i < h; i++) {
            for (int j = 0; j < w; j++) {
                if (g[i][j] == '#') continue;
                if (i == 0 && j == 0) {
                    dp[i][j] = 1;
                    continue;
                }
                long up = i >= 1 ? dp[i - 1][j] : 0;
                long left = j >= 1 ? dp[i][j - 1] : 0;
                dp[i][j] = (up + left) % mod;
            }
        }
        System.out.println(dp[h - 1][w - 1]);
    }
}
