import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        Scanner sc = new Scanner(System.in);
        int t = sc.nextInt();
        String prefix = "Case #";
        for (int k = 0; k < t; k++) {
            long a = sc.nextLong();
            long b = sc.nextLong();
            String label = prefix + (k + 1) + ": ";
            System.out.println(label + (a + b));
        }
    }
}
