package schemes

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// progressLog records one member's progress calls.
type progressLog struct {
	mu          sync.Mutex
	calls       int
	last, total int64
	backwards   bool
}

func (p *progressLog) fn(done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if done < p.last {
		p.backwards = true
	}
	p.last, p.total = max(p.last, done), total
}

// TestProgress checks that every member's progress ends exactly at the
// total it announced, for every scheme, encoding and rebuilding.
func TestProgress(t *testing.T) {
	for _, params := range []Params{
		{Kind: Partner, Size: 3, Replicas: 2, PieceSize: 700},
		{Kind: XOR, Size: 4, PieceSize: 700},
		{Kind: RS, Size: 5, Parity: 2, PieceSize: 700},
	} {
		t.Run(params.Kind.String(), func(t *testing.T) {
			ts := newTestSet(t, params)
			ts.fillShape(shapes(params.Size, true)["uneven"], 9)
			for _, op := range []string{"encode", "rebuild"} {
				logs := make([]*progressLog, params.Size)
				var ms []Member
				if op == "encode" {
					ms = ts.listAll()
				}
				_, errs := runAll(t, params.Size, func(ctx context.Context, r int, links Links) (*Result, error) {
					logs[r] = &progressLog{}
					opt := WithProgress(logs[r].fn)
					if op == "encode" {
						return Encode(ctx, ts.p, ms[r], links, opt)
					}
					return Rebuild(ctx, ts.p, ts.member(r), []int{1, 2}[:min(2, params.Tolerance())], links, opt)
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("%s rank %d: %v", op, r, err)
					}
					l := logs[r]
					if l.calls == 0 || l.total == 0 || l.last != l.total || l.backwards {
						t.Errorf("%s rank %d: %s", op, r, fmt.Sprintf("%d calls, done %d of %d, backwards %v", l.calls, l.last, l.total, l.backwards))
					}
				}
				if op == "encode" {
					ts.lose(1, false)
					if params.Tolerance() > 1 {
						ts.lose(2, true)
					}
				}
			}
		})
	}
}

func TestCanRebuild(t *testing.T) {
	tests := []struct {
		p    Params
		lost []int
		ok   bool
	}{
		{Params{Kind: XOR, Size: 4}, nil, true},
		{Params{Kind: XOR, Size: 4}, []int{2}, true},
		{Params{Kind: XOR, Size: 4}, []int{1, 2}, false},
		{Params{Kind: RS, Size: 5, Parity: 2}, []int{0, 3}, true},
		{Params{Kind: RS, Size: 5, Parity: 2}, []int{0, 1, 3}, false},
		{Params{Kind: Partner, Size: 4, Replicas: 1}, []int{0, 2}, true},
		{Params{Kind: Partner, Size: 4, Replicas: 1}, []int{1, 2}, false}, // 2's copy is on 3, 1's on 2
		{Params{Kind: Single, Size: 1}, []int{0}, false},
		{Params{Kind: XOR, Size: 4}, []int{7}, false},
	}
	for _, tt := range tests {
		if err := tt.p.CanRebuild(tt.lost); (err == nil) != tt.ok {
			t.Errorf("%+v lost %v: %v, want ok=%v", tt.p, tt.lost, err, tt.ok)
		}
	}
}
