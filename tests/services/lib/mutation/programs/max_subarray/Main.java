import java.io.*;
import java.util.*;

public class Main {
    static long best(int[] a) {
        long best = a[0];
        long cur = 0;
        for (int i = 0; i < a.length; i++) {
            cur = Math.max(cur + a[i], a[i]);
            best = Math.max(best, cur);
        }
        return best;
    }

    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        int n = Integer.parseInt(in.readLine().trim());
        int[] a = new int[n];
        StringTokenizer st = new StringTokenizer(in.readLine());
        for (int i = 0; i < n; i++) a[i] = Integer.parseInt(st.nextToken());
        System.out.println(best(a));
    }
}
