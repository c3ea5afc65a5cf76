#include <iostream>
#include <string>
using namespace std;

int main() {
    int t;
    cin >> t;
    string prefix = "Case #";
    for (int k = 1; k <= t; k++) {
        long long a, b;
        cin >> a >> b;
        string label = prefix + to_string(k) + ": ";
        cout << label << a + b << "\n";
    }
    return 0;
}
