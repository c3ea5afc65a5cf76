#include <algorithm>
#include <climits>
#include <iostream>
#include <string>
#include <vector>
using namespace std;
typedef long long ll;

int main() {
    int n;
    ll lo, hi;
    cin >> n >> lo >> hi;
    vector<ll> v(n);
    for (auto &x : v) cin >> x;
    int count = 0;
    long long sum = 0;
    for (int i = 0; i < n; i++) {
        if (lo <= v[i] && v[i] <= hi) {
            count = count + 1;
            sum += v[i];
        }
    }
    cout << count << ' ' << sum << endl;
}
