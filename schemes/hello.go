package schemes

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/scrfs/scrfs/files"
	"github.com/scrfs/scrfs/redfile"
)

// hello is the first message between any two members of an operation: it
// proves they run the same operation with the same parameters and carries
// what each member needs to know about the others before data moves.
type hello struct {
	Op        string `json:"op"`
	Kind      string `json:"kind"`
	Size      int    `json:"size"`
	Replicas  int    `json:"replicas"`
	Parity    int    `json:"parity"`
	Piece     int    `json:"piece"`
	Dataset   string `json:"dataset"`
	Group     int    `json:"group"`
	Groups    int    `json:"groups"`
	Nodes     []int  `json:"nodes"`
	Rank      int    `json:"rank"`
	Lost      []int  `json:"lost,omitempty"`
	Logical   int64  `json:"logical"`
	Chunk     int64  `json:"chunk,omitempty"`
	BlockSize int    `json:"block_size,omitempty"`
	// Metas (rebuild only) carries, to a lost member, the metadata this
	// member holds of ranks the lost member must record.
	Metas []redfile.MemberMeta `json:"metas,omitempty"`
}

func newHello(op string, p Params, m Member, lost []int) hello {
	return hello{
		Op: op, Kind: p.Kind.String(), Size: p.Size, Replicas: p.Replicas, Parity: p.Parity,
		Piece: p.pieceSize(), Dataset: m.Dataset, Group: m.Set.Group, Groups: m.Set.Groups,
		Nodes: m.Set.Nodes, Rank: m.Rank, Lost: lost,
	}
}

// check compares a peer's hello, from rank from, with ours.
func (h *hello) check(peer *hello, from int) error {
	bad := func(what string, got, want any) error {
		return &PeerError{Rank: from, Err: fmt.Errorf("%w: peer has %s %v, this member %v", ErrMismatch, what, got, want)}
	}
	switch {
	case peer.Rank != from:
		return bad("rank", peer.Rank, from)
	case peer.Op != h.Op:
		return bad("operation", peer.Op, h.Op)
	case peer.Kind != h.Kind || peer.Size != h.Size || peer.Replicas != h.Replicas || peer.Parity != h.Parity:
		return bad("params", fmt.Sprintf("%s/%d/%d/%d", peer.Kind, peer.Size, peer.Replicas, peer.Parity),
			fmt.Sprintf("%s/%d/%d/%d", h.Kind, h.Size, h.Replicas, h.Parity))
	case peer.Piece != h.Piece:
		return bad("piece size", peer.Piece, h.Piece)
	case peer.Dataset != h.Dataset:
		return bad("dataset", peer.Dataset, h.Dataset)
	case peer.Group != h.Group || peer.Groups != h.Groups:
		return bad("group", fmt.Sprintf("%d/%d", peer.Group, peer.Groups), fmt.Sprintf("%d/%d", h.Group, h.Groups))
	case !slices.Equal(peer.Nodes, h.Nodes):
		return bad("nodes", peer.Nodes, h.Nodes)
	case !slices.Equal(peer.Lost, h.Lost):
		return bad("lost members", peer.Lost, h.Lost)
	case peer.Logical < 0 || peer.Chunk < 0 || peer.BlockSize < 0:
		return bad("sizes", fmt.Sprintf("%d/%d/%d", peer.Logical, peer.Chunk, peer.BlockSize), "non-negative")
	}
	return nil
}

// sayHello exchanges hellos with every other member: mine(r) is what to
// send to rank r. It returns the peers' hellos by rank.
func (s *session) sayHello(mine func(r int) hello) (map[int]*hello, error) {
	payloads := make(map[int][]byte)
	var own hello
	for _, r := range s.others() {
		h := mine(r)
		own = h
		b, err := json.Marshal(h)
		if err != nil {
			return nil, s.fail(fmt.Errorf("encode hello: %w", err))
		}
		payloads[r] = b
	}
	got, err := s.exchange(msgHello, payloads, s.others())
	if err != nil {
		return nil, err
	}
	// Any disagreement stops the operation before data moves; comparing
	// with every peer (not just neighbours) catches a member that was
	// started with another layout.
	out := make(map[int]*hello, len(got))
	for r, b := range got {
		h := new(hello)
		if err := json.Unmarshal(b, h); err != nil {
			return nil, s.fail(&PeerError{Rank: r, Err: fmt.Errorf("%w: hello: %v", ErrProtocol, err)})
		}
		if err := own.check(h, r); err != nil {
			return nil, s.fail(err)
		}
		out[r] = h
	}
	return out, nil
}

// sendMeta sends this member's metadata to every rank in to and receives the
// metadata of every rank in from, checking each is well formed and has the
// logical size its owner announced (logical[r], or -1 to skip).
func (s *session) sendMeta(own *redfile.MemberMeta, to, from []int, logical map[int]int64) (map[int]*redfile.MemberMeta, error) {
	b, err := json.Marshal(own)
	if err != nil {
		return nil, s.fail(fmt.Errorf("encode metadata: %w", err))
	}
	payloads := make(map[int][]byte)
	for _, r := range to {
		payloads[r] = b
	}
	got, err := s.exchange(msgMeta, payloads, from)
	if err != nil {
		return nil, err
	}
	out := make(map[int]*redfile.MemberMeta)
	for r, b := range got {
		mm := new(redfile.MemberMeta)
		if err := json.Unmarshal(b, mm); err != nil {
			return nil, s.fail(&PeerError{Rank: r, Err: fmt.Errorf("%w: metadata: %v", ErrProtocol, err)})
		}
		if err := checkMeta(mm, r); err != nil {
			return nil, s.fail(&PeerError{Rank: r, Err: err})
		}
		if want, ok := logical[r]; ok && want >= 0 && mm.Logical != want {
			return nil, s.fail(&PeerError{Rank: r, Err: fmt.Errorf("%w: metadata of %d bytes, announced %d", ErrMismatch, mm.Logical, want)})
		}
		out[r] = mm
	}
	return out, nil
}

// checkMeta validates untrusted member metadata claimed to be rank r's.
func checkMeta(mm *redfile.MemberMeta, r int) error {
	if mm.Rank != r {
		return fmt.Errorf("%w: metadata of rank %d, want %d", ErrProtocol, mm.Rank, r)
	}
	if err := files.Check(mm.Files); err != nil {
		return fmt.Errorf("%w: metadata of rank %d: %v", ErrProtocol, r, err)
	}
	if files.Bytes(mm.Files) != mm.Logical {
		return fmt.Errorf("%w: metadata of rank %d: logical size %d, files sum to %d", ErrProtocol, r, mm.Logical, files.Bytes(mm.Files))
	}
	return nil
}
