import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner sc = new Scanner(System.in);
        int n = sc.nextInt();
        int q = sc.nextInt();
        long[] pre = new long[n + 1];
        for (int i = 1; i <= n; i++) {
            pre[i] = pre[i - 1] + sc.nextInt();
        }
        StringBuilder out = new StringBuilder();
        for (int k = 0; k < q; k++) {
            int l = sc.nextInt();
            int r = sc.nextInt();
            out.append(pre[r] - pre[l - 1]).append('\n');
        }
        System.out.print(out);
    }
}
