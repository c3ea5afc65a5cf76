#include <stdio.h>

static long long values[100000];

int main(void) {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    for (int i = 0; i < n; i++) {
        int x;
        scanf("%d", &x);
        values[i] = x;
    }
    long long best = values[0];
    long long current = 0;
    for (int i = 0; i < n; i++) {
        current = current + values[i];
        if (current > best) best = current;
        if (current < 0) current = 0;
    }
    printf("%lld\n", best);
    return 0;
}
