package prefix

import (
	"log/slog"
	"reflect"
	"testing"
	"time"
)

// The readers of the prefix's metadata take bytes another user, or anyone
// who may write the bucket, can choose. The fuzz targets give them
// arbitrary bytes, the seeds the documents scrfs writes (signed, unsigned,
// and signed then changed by one byte): nothing panics, nothing invalid
// decodes, and nothing verifies that the tests' key did not sign.

// fuzzKey signs the seeds.
var fuzzKey = macKey(testKey)

func seedDocs(f *testing.F) {
	ix := emptyIndex()
	ix.Put(IndexEntry{Name: "ckpt.1", ID: 1, State: StateComplete, Nodes: 2, Files: 3, Bytes: 4,
		Flushed: time.Unix(1e9, 5).UTC(), FailedFetches: []FetchFailure{{Node: 1, Reason: "crc"}}})
	ix.Put(IndexEntry{Name: "ckpt.2", ID: 2, State: StateFlushing})
	ix.Current = "ckpt.1"
	b, _ := encodeIndex(ix)
	f.Add(b)
	p := &Prefix{key: fuzzKey}
	must(f, p.sign(ix, nil, ""))
	b, _ = encodeIndex(ix)
	f.Add(b)
	es := sampleEntries(0)
	sortEntries(es)
	files, bytes := totals(es)
	for _, d := range []struct {
		kind string
		head any
	}{
		{kindManifest, manifestHead{Version: 1, Dataset: "ckpt.1", Nodes: 1, Files: files, Bytes: bytes, Record: digest(nil)}},
		{kindPart, partHead{Version: 1, Dataset: "ckpt.1", Files: files, Bytes: bytes}},
	} {
		body, _ := encodeDoc(d.head, es)
		f.Add(append(body, "}\n"...))
		sealed, _ := fuzzKey.seal(d.kind, body)
		f.Add(sealed)
		changed := append([]byte(nil), sealed...)
		changed[len(body)/2] ^= 1
		f.Add(changed)
	}
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"version":1}`, `{"version":1,"datasets":[]}`,
		`{"version":1,"datasets":null}`, `{"version":"1"}`, `{"version":1e400}`,
		`{"version":1,"dataset":"d","nodes":1,"files":0,"bytes":0,"entries":[]}`,
		`{"version":1,"dataset":"d","nodes":1,"files":0,"bytes":0,"entries":[],"mac":"00"}`,
		`{"version":1,"dataset":"d","nodes":1,"files":1,"bytes":9223372036854775807,"entries":[{"path":"a","type":"file","size":9223372036854775807,"node":0}]}`,
		`{"version":1,"dataset":"d","nodes":1,"files":2,"bytes":-2,"entries":[{"path":"a","type":"file","size":9223372036854775807},{"path":"b","type":"file","size":9223372036854775807}]}`,
		`{"version":1,"dataset":"d","nodes":1,"entries":[{"path":"l","type":"symlink","target":"/"},{"path":"l/x","type":"file"}]}`,
		`{"version":1,"current":"x","datasets":[{"name":"x","state":"complete","nodes":0}]}`,
		`{"version":1,"current":"x","current_mac":"zz","datasets":[{"name":"x","state":"complete","nodes":1,"mac":"` + string(make([]byte, 64)) + `"}]}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeIndex: arbitrary bytes never panic; what decodes re-encodes to
// an index that decodes to the same value; an entry verifies only if the
// tests' key signed exactly it, and stays verified through a round trip;
// the current mark is kept only if the key signed exactly that name.
func FuzzDecodeIndex(f *testing.F) {
	seedDocs(f)
	p := &Prefix{s: newDirStore("/p"), key: fuzzKey, warned: map[string]bool{}, log: slog.New(slog.DiscardHandler)}
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := p.openIndex(b)
		if err != nil {
			return
		}
		if err := ix.validate(); err != nil {
			t.Fatalf("decoded an invalid index: %v", err)
		}
		ix.Newest(nil)
		for i := range ix.Datasets {
			e := &ix.Datasets[i]
			if e.Trust == Verified && e.MAC != fuzzKey.sum(kindEntry, entryBytes(e)) {
				t.Fatalf("entry %s verified with a MAC the key did not make", e.Name)
			}
		}
		if ix.Current != "" && ix.CurrentMAC != fuzzKey.sum(kindCurrent, []byte(ix.Current)) {
			t.Fatalf("current mark %s kept with a MAC the key did not make", ix.Current)
		}
		out, err := encodeIndex(ix)
		if err != nil {
			t.Fatal(err)
		}
		ix2, err := p.openIndex(out)
		if err != nil {
			t.Fatalf("re-encoded index does not decode: %v\n%s", err, out)
		}
		if !sameJSON(t, ix, ix2) {
			t.Fatalf("round trip changed the index:\n%s", out)
		}
		for i := range ix.Datasets {
			if ix.Datasets[i].Trust != ix2.Datasets[i].Trust {
				t.Fatalf("round trip changed the trust of %s: %v, then %v", ix.Datasets[i].Name, ix.Datasets[i].Trust, ix2.Datasets[i].Trust)
			}
		}
	})
}

// FuzzDecodeManifest: the same for merged manifests and node parts (the
// same format with a node instead of a node count): a document verifies
// only if the tests' key sealed exactly its bytes as that kind, and what
// decodes re-encodes and re-seals to a document that decodes the same and
// verifies.
func FuzzDecodeManifest(f *testing.F) {
	seedDocs(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range []string{kindManifest, kindPart} {
			if fuzzKey.open(kind, b) == Verified {
				other := kindManifest
				if kind == kindManifest {
					other = kindPart
				}
				if fuzzKey.open(other, b) == Verified {
					t.Fatalf("a document verifies as both %s and %s", kind, other)
				}
			}
		}
		if m, err := decodeManifest(b); err == nil {
			if err := checkEntries(m.Entries); err != nil {
				t.Fatalf("decoded invalid entries: %v", err)
			}
			body, err := encodeDoc(manifestHead{Version: m.Version, Dataset: m.Dataset, Nodes: m.Nodes,
				Created: m.Created, Files: m.Files, Bytes: m.Bytes, Record: m.Record}, m.Entries)
			if err != nil {
				t.Fatal(err)
			}
			out, err := fuzzKey.seal(kindManifest, body)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := decodeManifest(out)
			if err != nil {
				t.Fatalf("re-encoded manifest does not decode: %v\n%s", err, out)
			}
			if !sameJSON(t, m, m2) || fuzzKey.open(kindManifest, out) != Verified {
				t.Fatalf("round trip changed the manifest or its MAC:\n%s", out)
			}
		}
		if p, err := decodePart(b); err == nil {
			if err := checkPartEntries(p.Entries, p.head.Node); err != nil {
				t.Fatalf("decoded invalid part: %v", err)
			}
			body, err := encodeDoc(p.head, p.Entries)
			if err != nil {
				t.Fatal(err)
			}
			out, err := fuzzKey.seal(kindPart, body)
			if err != nil {
				t.Fatal(err)
			}
			p2, err := decodePart(out)
			if err != nil {
				t.Fatalf("re-encoded part does not decode: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(p.Entries, p2.Entries) || fuzzKey.open(kindPart, out) != Verified {
				t.Fatalf("round trip changed the part or its MAC:\n%s", out)
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
