import java.util.*;

public class Main {
    public static void main(String[] args) {
        Scanner sc = new Scanner(System.in);
        int n = sc.nextInt();
        long lo = sc.nextLong(), hi = sc.nextLong();
        int count = 0;
        long sum = 0;
        for (int i = 0; i < n; i++) {
            long v = sc.nextLong();
            if (v >= lo && v <= hi) {
                count = count + 1;
                sum += v;
            }
        }
        System.out.println(count + " " + sum);
    }
}
