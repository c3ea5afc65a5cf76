#include <stdio.h>

/* Total of n numbers and the largest prefix sum. */
int main(void) {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    long long total = 0;
    long long best = -4000000000000000000LL;
    for (int i = 0; i < n; i++) {
        int x;
        if (scanf("%d", &x) != 1) return 0;
        total = total + x;
        if (total > best) best = total;
    }
    printf("%lld %lld\n", total, best);
    return 0;
}
