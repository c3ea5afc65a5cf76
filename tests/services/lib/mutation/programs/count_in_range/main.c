#include <stdio.h>

int main(void) {
    int n;
    long long lo, hi;
    if (scanf("%d %lld %lld", &n, &lo, &hi) != 3) return 0;
    int count = 0;
    long long sum = 0;
    for (int i = 0; i < n; i++) {
        long long v;
        scanf("%lld", &v);
        if (v >= lo && v <= hi) {
            count++;
            sum += v;
        }
    }
    printf("%d %lld\n", count, sum);
    return 0;
}
