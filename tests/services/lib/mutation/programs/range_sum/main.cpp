#include <iostream>
#include <vector>

int main() {
    int n, q;
    std::cin >> n >> q;
    std::vector<long long> pre(n + 1, 0);
    for (int i = 1; i <= n; ++i) {
        long long x;
        std::cin >> x;
        pre[i] = pre[i - 1] + x;
    }
    // answer each query from the prefix sums
    for (int k = 0; k < q; k++) {
        int l, r;
        std::cin >> l >> r;
        std::cout << pre[r] - pre[l - 1] << '\n';
    }
}
