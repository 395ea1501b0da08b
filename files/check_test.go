package files

import "testing"

func TestCheckRejectsUnsafePaths(t *testing.T) {
	bad := []Meta{
		{Path: "../escape", Type: Regular},
		{Path: "/abs", Type: Regular},
		{Path: "a/../../b", Type: Regular},
		{Path: ".scrfs/x", Type: Regular},
		{Path: "", Type: Regular},
		{Path: "orphan/child", Type: Regular},
		{Path: "h", Type: HardLink, Target: "nowhere"},
		{Path: "x", Type: Regular, Size: -1},
		{Path: "x", Type: Regular, Mode: 0o170000},
		{Path: "x", Type: Regular, Size: MaxBytes + 1},
		{Path: "s", Type: Symlink},
		{Path: "x", Type: 9},
	}
	for _, f := range bad {
		if err := Check([]Meta{f}); err == nil {
			t.Errorf("accepted %+v", f)
		}
	}
	if err := Check([]Meta{{Path: "d", Type: Dir}, {Path: "d", Type: Regular}}); err == nil {
		t.Error("accepted a duplicate path")
	}
	if err := Check([]Meta{{Path: "a", Type: Dir}, {Path: ".", Type: Dir}}); err == nil {
		t.Error(`accepted "." after the first entry`)
	}
}
