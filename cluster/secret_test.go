package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scrfs/scrfs/config"
)

// A secret file others can read is refused with the fix in the message; a
// private one is used.
func TestLoadSecretFileMode(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	cases := []struct {
		mode   os.FileMode
		body   string
		errHas string // "" = accepted
	}{
		{mode: 0o600, body: secret + "\n"},
		{mode: 0o400, body: secret},
		{mode: 0o640, body: secret, errHas: "chmod 600"},
		{mode: 0o644, body: secret, errHas: "mode 0644"},
		{mode: 0o604, body: secret, errHas: "readable by group or others"},
		{mode: 0o600, body: "short", errHas: "at least 16 are needed"},
	}
	for _, tc := range cases {
		path := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		cfg.Job.SecretFile = path
		got, err := LoadSecret(cfg)
		switch {
		case tc.errHas == "" && err != nil:
			t.Errorf("mode %04o: %v", tc.mode, err)
		case tc.errHas == "" && string(got) != secret:
			t.Errorf("mode %04o: secret %q", tc.mode, got)
		case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("mode %04o body %q: error %v, want one containing %q", tc.mode, tc.body, err, tc.errHas)
		}
		if tc.mode&0o077 != 0 && !errors.Is(err, ErrSecretExposed) {
			t.Errorf("mode %04o: error %v does not wrap ErrSecretExposed", tc.mode, err)
		}
	}
}

// The secret created in the prefix is private, so every node can load it.
func TestLoadSecretCreated(t *testing.T) {
	cfg := config.Default()
	cfg.Paths.Prefix = t.TempDir()
	a, err := LoadSecret(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadSecret(cfg)
	if err != nil || string(a) != string(b) {
		t.Fatalf("second load: %q, %v; first %q", b, err, a)
	}
	fi, err := os.Stat(filepath.Join(cfg.Paths.Prefix, ".scrfs", "secret"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created secret: %v, %v", fi, err)
	}
}
