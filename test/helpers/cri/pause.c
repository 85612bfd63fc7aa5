/* The sandbox ("pause") process of the e2e suite's CRI pods: holds the pod's namespaces open, reaps
 * any child it inherits, and exits 0 on SIGINT or SIGTERM. Built with gcc -static by pause-image.ts,
 * so the image needs nothing else (no registry is reachable from the test machines). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction term = {0}, child = {0};
  term.sa_handler = on_term;
  child.sa_handler = on_child;
  child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGINT, &term, NULL) != 0 || sigaction(SIGTERM, &term, NULL) != 0 ||
      sigaction(SIGCHLD, &child, NULL) != 0) {
    return 1;
  }
  for (;;) pause();
}
