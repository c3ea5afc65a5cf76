#include <algorithm>
#include <climits>
#include <iostream>
#include <string>
#include <vector>
using namespace std;

const long long MOD = 1000000007LL;

int main() {
    int h, w;
    cin >> h >> w;
    vector<string> g(h);
    for (int i = 0; i < h; i++) cin >> g[i];
    vector<vector<long long>> dp(h, vector<long long>(w, 0));
    dp[0][0] = g[0][0] == '.' ? 1 : 0;
    for (int i = 0; i < h; i++) {
        for (int j = 0; j < w; j++) {
            if (g[i][j] == '#') continue;
            if (i >= 1) dp[i][j] = (dp[i][j] + dp[i - 1][j]) % MOD;
            if (j >= 1) dp[i][j] = (dp[i][j] + dp[i][j - 1]) % MOD;
        }
    }
    cout << dp[h - 1][w - 1] << endl;
}
