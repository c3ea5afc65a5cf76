#include <cstdio>

const int MOD = 1000000007;

int main() {
    int n;
    if (std::scanf("%d", &n) != 1) return 0;
    long long f[100005];
    f[0] = 0;
    f[1] = 1;
    for (int i = 2; i <= n; i++) {
        f[i] = (f[i - 1] + f[i - 2]) % MOD;
    }
    std::printf("%lld\n", f[n]);
    return 0;
}
