import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner sc = new Scanner(System.in);
        int n = sc.nextInt();
        long target = sc.nextLong();
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = sc.nextInt();
        int pairs = 0;
        long largest = 0;
        for (int i = 0; i < n; i++) {
            for (int j = i + 1; j < n; j++) {
                long s = (long) a[i] + a[j];
                if (s == target) pairs++;
                if (s > largest) largest = s;
            }
        }
        System.out.println(pairs + " " + largest);
    }
}
