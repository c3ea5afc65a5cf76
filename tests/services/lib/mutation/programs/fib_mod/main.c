#include <stdio.h>

const long long MOD = 1000000007LL;

int main(void) {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    long long a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        long long c = (a + b) % MOD;
        a = b;
        b = c;
    }
    printf("%lld\n", a);
    return 0;
}
