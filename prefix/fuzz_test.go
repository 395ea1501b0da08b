package prefix

import (
	"reflect"
	"testing"
	"time"
)

func seedDocs(f *testing.F) {
	ix := emptyIndex()
	ix.Put(IndexEntry{Name: "ckpt.1", ID: 1, State: StateComplete, Nodes: 2, Files: 3, Bytes: 4,
		Flushed: time.Unix(1e9, 5).UTC(), FailedFetches: []FetchFailure{{Node: 1, Reason: "crc"}}})
	ix.Put(IndexEntry{Name: "ckpt.2", ID: 2, State: StateFlushing})
	ix.Current = "ckpt.1"
	b, _ := encodeIndex(ix)
	f.Add(b)
	es := sampleEntries(0)
	sortEntries(es)
	files, bytes := totals(es)
	b, _ = encodeDoc(manifestHead{Version: 1, Dataset: "ckpt.1", Nodes: 1, Files: files, Bytes: bytes}, es)
	f.Add(b)
	b, _ = encodeDoc(partHead{Version: 1, Dataset: "ckpt.1", Files: files, Bytes: bytes}, es)
	f.Add(b)
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"version":1}`, `{"version":1,"datasets":[]}`,
		`{"version":1,"datasets":null}`, `{"version":"1"}`, `{"version":1e400}`,
		`{"version":1,"dataset":"d","nodes":1,"files":0,"bytes":0,"entries":[]}`,
		`{"version":1,"dataset":"d","nodes":1,"files":1,"bytes":9223372036854775807,"entries":[{"path":"a","type":"file","size":9223372036854775807,"node":0}]}`,
		`{"version":1,"dataset":"d","nodes":1,"files":2,"bytes":-2,"entries":[{"path":"a","type":"file","size":9223372036854775807},{"path":"b","type":"file","size":9223372036854775807}]}`,
		`{"version":1,"dataset":"d","nodes":1,"entries":[{"path":"l","type":"symlink","target":"/"},{"path":"l/x","type":"file"}]}`,
		`{"version":1,"current":"x","datasets":[{"name":"x","state":"complete","nodes":0}]}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeIndex: arbitrary bytes never panic; what decodes re-encodes to
// an index that decodes to the same value.
func FuzzDecodeIndex(f *testing.F) {
	seedDocs(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := decodeIndex(b)
		if err != nil {
			return
		}
		if err := ix.validate(); err != nil {
			t.Fatalf("decoded an invalid index: %v", err)
		}
		ix.Newest(nil)
		out, err := encodeIndex(ix)
		if err != nil {
			t.Fatal(err)
		}
		ix2, err := decodeIndex(out)
		if err != nil {
			t.Fatalf("re-encoded index does not decode: %v\n%s", err, out)
		}
		if !sameJSON(t, ix, ix2) {
			t.Fatalf("round trip changed the index:\n%s", out)
		}
	})
}

// FuzzDecodeManifest: the same for merged manifests, and for node parts
// (the same format with a node instead of a node count).
func FuzzDecodeManifest(f *testing.F) {
	seedDocs(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := decodeManifest(b); err == nil {
			if err := checkEntries(m.Entries); err != nil {
				t.Fatalf("decoded invalid entries: %v", err)
			}
			out, err := encodeDoc(manifestHead{Version: m.Version, Dataset: m.Dataset, Nodes: m.Nodes,
				Created: m.Created, Files: m.Files, Bytes: m.Bytes}, m.Entries)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := decodeManifest(out)
			if err != nil {
				t.Fatalf("re-encoded manifest does not decode: %v\n%s", err, out)
			}
			if !sameJSON(t, m, m2) {
				t.Fatalf("round trip changed the manifest:\n%s", out)
			}
		}
		if p, err := decodePart(b); err == nil {
			if err := checkPartEntries(p.Entries, p.head.Node); err != nil {
				t.Fatalf("decoded invalid part: %v", err)
			}
			out, err := encodeDoc(p.head, p.Entries)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := decodePart(out)
			if err != nil {
				t.Fatalf("re-encoded part does not decode: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(p.Entries, p2.Entries) {
				t.Fatalf("round trip changed the part:\n%s", out)
			}
		}
	})
}

// sameJSON compares two values through their JSON form, which is what the
// files promise to preserve (times lose their monotonic reading and
// location, nothing else).
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := jsonOf(a)
	jb, err2 := jsonOf(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return ja == jb
}
