// A C program that prints the path of the loader mapped into its process (/proc/self/maps): the
// interpreter the kernel (or qemu) really started, whatever PT_INTERP claims.

export const LOADER_MAPS_SOURCE = `#include <stdio.h>
#include <string.h>
int main(void) {
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[4096];
  while (maps != NULL && fgets(line, sizeof line, maps) != NULL) {
    char *path = strchr(line, '/');
    if (path != NULL && strstr(path, "/ld-") != NULL) { printf("loader %s", path); return 0; }
  }
  puts("loader not found");
  return 1;
}
`;
