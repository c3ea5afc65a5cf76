#include <algorithm>
#include <climits>
#include <iostream>
#include <string>
#include <vector>
using namespace std;

int main() {
    int n;
    long long target;
    cin >> n >> target;
    vector<int> a(n);
    for (int i = 0; i < n; i++) cin >> a[i];
    int pairs = 0;
    long long largest = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            long long s = (long long)a[i] + a[j];
            if (s == target) pairs++;
            if (s > largest) largest = s;
        }
    cout << pairs << " " << largest << "\n";
}
