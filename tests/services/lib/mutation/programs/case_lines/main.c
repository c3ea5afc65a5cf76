#include <stdio.h>

int main(void) {
    int t;
    if (scanf("%d", &t) != 1) return 0;
    for (int k = 0; k < t; k++) {
        long long a, b;
        scanf("%lld %lld", &a, &b);
        long long total = a + b;
        printf("Case #%d: %lld\n", k + 1, total);
    }
    return 0;
}
