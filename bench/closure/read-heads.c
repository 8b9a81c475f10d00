/* The floor for any tool that must look at every ELF file of a closure: open each file named in
 * LIST (paths relative to ROOT, each ended by a NUL byte), read its first 4 KiB, close it. One
 * process, no parsing, no walk. Prints how many files and bytes it read.
 *
 *   read-heads ROOT LIST
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: read-heads ROOT LIST\n");
    return 2;
  }
  int root = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  FILE *list = fopen(argv[2], "re");
  if (root < 0 || list == NULL) {
    perror(root < 0 ? argv[1] : argv[2]);
    return 1;
  }
  static char head[4096];
  char *path = NULL;
  size_t capacity = 0;
  long files = 0;
  long long bytes = 0;
  while (getdelim(&path, &capacity, '\0', list) > 0) {
    int fd = openat(root, path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : read(fd, head, sizeof head);
    if (got < 0) {
      perror(path);
      return 1;
    }
    close(fd);
    files++;
    bytes += got;
  }
  printf("%ld files, %lld bytes read\n", files, bytes);
  return 0;
}
