#include <stdio.h>

#define MOD 1000000007

char grid[105][105];
long long ways[105][105];

int main(void) {
    int h, w;
    if (scanf("%d %d", &h, &w) != 2) return 0;
    for (int i = 0; i < h; i++) scanf("%s", grid[i]);
    for (int i = 0; i < h; i++) {
        for (int j = 0; j < w; j++) {
            if (grid[i][j] == '#') {
                ways[i][j] = 0;
            } else if (i == 0 && j == 0) {
                ways[i][j] = 1;
            } else {
                long long up = i > 0 ? ways[i - 1][j] : 0;
                long long left = j > 0 ? ways[i][j - 1] : 0;
                ways[i][j] = (up + left) % MOD;
            }
        }
    }
    printf("%lld\n", ways[h - 1][w - 1]);
    return 0;
}
