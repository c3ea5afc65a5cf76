#include <algorithm>
#include <climits>
#include <iostream>
#include <string>
#include <vector>
using namespace std;

int main() {
    ios::sync_with_stdio(false);
    cin.tie(nullptr);
    int n;
    cin >> n;
    vector<long long> a(n);
    for (int i = 0; i < n; i++) cin >> a[i];
    long long total = 0, best = LLONG_MIN;
    for (int i = 0; i < n; i++) {
        total = total + a[i];
        best = max(best, total);
    }
    cout << total << " " << best << "\n";
    return 0;
}
