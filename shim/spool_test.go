// The spool writer's directories: every level it creates is mode 0700 and the spool file lands in
// the last one, whole, mode 0600, with no temp file beside it. (That each new level's parent is
// fsynced cannot be observed without a crash; parentOf, which names the directory fsynced, is.)

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpoolCreatesEachMissingDirectoryLevelWithMode0700AndTheFileLandsInTheLast(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "var", "lib", "steward", "spool")
	body := []byte(`{"env":{"CNI_COMMAND":"DEL"}}`)
	p, err := spoolRequest(dir, "abc", body)
	if err != nil {
		t.Fatal(err)
	}
	for _, level := range []string{"var", "var/lib", "var/lib/steward", "var/lib/steward/spool"} {
		st, err := os.Stat(filepath.Join(root, level))
		if err != nil {
			t.Fatal(err)
		}
		if !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, want a directory with mode 0700", level, st.Mode())
		}
	}
	if filepath.Dir(p) != dir || !strings.HasSuffix(p, ".json") {
		t.Errorf("spooled to %s, want a .json file in %s", p, dir)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != string(body) {
		t.Errorf("spool file holds %q (%v), want %q", got, err, body)
	}
	if st, _ := os.Stat(p); st == nil || st.Mode().Perm() != 0o600 {
		t.Errorf("spool file mode %v, want 0600", st)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("spool dir holds %d entries, want only the spool file (no temp file)", len(entries))
	}
}

func TestSpoolLeavesAnExistingDirectoryLevelsModeAlone(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := spoolRequest(filepath.Join(root, "spool"), "abc", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(root); st.Mode().Perm() != 0o755 {
		t.Errorf("existing level's mode changed to %v", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(root, "spool")); st.Mode().Perm() != 0o700 {
		t.Errorf("new level's mode %v, want 0700", st.Mode())
	}
}

func TestTheDirectoryFsyncedForANewLevelIsTheOneHoldingIt(t *testing.T) {
	cases := []struct {
		dir   string
		level int
		want  string
	}{
		{"/var/lib/steward", 2, "/"},
		{"/var/lib/steward", 3, "/var"},
		{"/var/lib/steward", 4, "/var/lib"},
		{"//var/./spool", 5, "//var/."},
		{"rel/spool", 1, "."},
		{"rel/spool", 2, "rel"},
	}
	for _, c := range cases {
		parts := strings.Split(c.dir, "/")
		if got := parentOf(parts[:c.level-1], c.dir); got != c.want {
			t.Errorf("parentOf(level %d of %q) = %q, want %q", c.level, c.dir, got, c.want)
		}
	}
}
