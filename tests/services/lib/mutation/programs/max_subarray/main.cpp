#include <algorithm>
#include <climits>
#include <iostream>
#include <string>
#include <vector>
using namespace std;

int main() {
    int n;
    cin >> n;
    vector<long long> a(n);
    for (int i = 0; i < n; i++) cin >> a[i];
    long long best = a[0], cur = 0;
    for (int i = 0; i < n; i++) {
        cur = max(cur + a[i], a[i]);
        best = max(best, cur);
    }
    long long span = 0;
    for (int i = 0; i < n; i++) span += a[i] >= 0 ? a[i] : -a[i];
    cout << best << "\n" << span << "\n";
    return 0;
}
