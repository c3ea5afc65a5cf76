#include <stdio.h>

int a[2000];

int main(void) {
    int n;
    long long target;
    if (scanf("%d %lld", &n, &target) != 2) return 0;
    for (int i = 0; i < n; i++) scanf("%d", &a[i]);
    int pairs = 0;
    long long largest = 0;
    for (int i = 0; i < n; i++) {
        for (int j = i + 1; j < n; j++) {
            long long s = (long long)a[i] + a[j];
            if (s == target) pairs++;
            if (s > largest) largest = s;
        }
    }
    printf("%d %lld\n", pairs, largest);
    return 0;
}
