package layout

import (
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	tests := []struct{ got, want string }{
		{JobDir("/dev/shm", "alice", "1234"), "/dev/shm/alice/scrfs.1234"},
		{JobDir("/dev/shm/", "alice", "1234"), "/dev/shm/alice/scrfs.1234"},
		{DatasetDir("/dev/shm/alice/scrfs.1234", "ckpt.100"), "/dev/shm/alice/scrfs.1234/ckpt.100"},
		{DatasetMetaDir("/dev/shm/alice/scrfs.1234/ckpt.100"), "/dev/shm/alice/scrfs.1234/ckpt.100/.scrfs"},
		{PrefixDatasetDir("/lustre/p", "ckpt.100"), "/lustre/p/ckpt.100"},
		{PrefixMetaDir("/lustre/p"), "/lustre/p/.scrfs"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	// Two jobs of one user, or two users of one job id, never share.
	if JobDir("/b", "u", "1") == JobDir("/b", "u", "2") || JobDir("/b", "u", "1") == JobDir("/b", "v", "1") {
		t.Error("job directories collide")
	}
}

func TestCheckDatasetName(t *testing.T) {
	for _, ok := range []string{"ckpt.100", "a", "step_00001", strings.Repeat("x", 255), ".hidden", "..."} {
		if err := CheckDatasetName(ok); err != nil {
			t.Errorf("CheckDatasetName(%q): %v", short(ok), err)
		}
	}
	tests := []struct{ name, want string }{
		{"", "empty"},
		{".", "not allowed"},
		{"..", "not allowed"},
		{MetaDir, "reserved"},
		{strings.Repeat("x", 256), "longer than 255"},
		{"a/b", "contains '/'"},
		{"a\x00b", "NUL"},
	}
	for _, tt := range tests {
		if err := CheckDatasetName(tt.name); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckDatasetName(%q) = %v, want error containing %q", short(tt.name), err, tt.want)
		}
	}
}
