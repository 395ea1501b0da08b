package namespace

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/jobnet"
	"github.com/scrfs/scrfs/schemes"
)

// The bytes of a range travel over a stream of their own as pieces of
// blockSize bytes (the last may be shorter), one message each: the
// piece's CRC32C (4 bytes, little endian), then its bytes. The receiver
// checks each piece as it lands. Readers of a range may use it at once:
// the holder checked the whole file against its record before it sent the
// first. A whole file, which the holder may check only as it sends it, and
// a partner's copy count once the call has succeeded, when the holder has
// said the whole matched. (Splicing pieces from the socket into the copy
// was tried: the check then has to read them back through a mapping, and
// its page faults cost more than the copy it saves.)

// pieceHead is the length of a piece's CRC32C.
const pieceHead = 4

// pieceBufs are the buffers of the paths that cannot do without one.
var pieceBufs = sync.Pool{New: func() any { b := make([]byte, pieceHead+blockSize); return &b }}

// pieceSender sends pieces over a stream.
type pieceSender struct {
	ctx   context.Context
	s     jobnet.Stream
	parts schemes.PartsSender // nil: the stream takes whole messages only
	head  [pieceHead]byte
	sent  int64
}

func newPieceSender(ctx context.Context, s jobnet.Stream) *pieceSender {
	ps, _ := s.(schemes.PartsSender)
	return &pieceSender{ctx: ctx, s: s, parts: ps}
}

// send sends piece b whose CRC32C is crc.
func (w *pieceSender) send(crc uint32, b []byte) error {
	binary.LittleEndian.PutUint32(w.head[:], crc)
	var err error
	if w.parts != nil {
		err = w.parts.SendParts(w.ctx, w.head[:], b)
	} else {
		bp := pieceBufs.Get().(*[]byte)
		msg := append(append((*bp)[:0], w.head[:]...), b...)
		err = w.s.Send(w.ctx, msg)
		pieceBufs.Put(bp)
	}
	w.sent += int64(len(b))
	return err
}

// pieceWriter cuts what is written to it into pieces, for a source that
// writes in its own sizes (a partner's copy). Flush sends the last piece.
type pieceWriter struct {
	*pieceSender
	buf []byte
}

func (w *pieceWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		k := copy(w.buf[len(w.buf):blockSize], b)
		w.buf, b = w.buf[:len(w.buf)+k], b[k:]
		if len(w.buf) == blockSize {
			if err := w.Flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// Flush sends what is buffered as a piece.
func (w *pieceWriter) Flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(crc32c.Checksum(w.buf), w.buf)
	w.buf = w.buf[:0]
	return err
}

// receive takes the pieces of bytes off..off+want of r's file from stream
// sid of node into r's copy, writing each behind the receipt of the next.
// When mark is set each piece counts for readers as soon as it is written;
// otherwise the caller decides.
func (n *Namespace) receive(ctx context.Context, r *Remote, node int, sid string, off, want int64, mark bool) error {
	s, err := n.net.AcceptStream(ctx, node, sid)
	if err != nil {
		return err
	}
	defer s.Close()
	l := startLanding(r, mark)
	err = n.receiveInto(ctx, l, s, r, node, off, want)
	if werr := l.finish(); err == nil {
		err = werr
	}
	return err
}

func (n *Namespace) receiveInto(ctx context.Context, l *landing, s jobnet.Stream, r *Remote, node int, off, want int64) error {
	for got := int64(0); got < want; {
		k, at := int(min(blockSize, want-got)), off+got
		bp, err := l.buffer(ctx)
		if err != nil {
			return err
		}
		msg, err := s.Recv(ctx, *bp)
		var b []byte
		if err == nil {
			b, err = checkPiece(msg, k, func() string {
				return fmt.Sprintf("%s/%s from node %d: the %d bytes at %d", r.dataset, r.p, node, k, at)
			})
		}
		if err != nil {
			l.free <- bp
			return err
		}
		l.land(bp, b, at)
		got += int64(k)
		n.metrics.received.Add(float64(k))
	}
	return nil
}

// checkPiece returns the bytes of piece msg, which must hold k of them
// with their CRC32C; what names them for an error.
func checkPiece(msg []byte, k int, what func() string) ([]byte, error) {
	if len(msg) != pieceHead+k {
		return nil, fmt.Errorf("%s: a message of %d bytes arrived, want a piece of %d", what(), len(msg), pieceHead+k)
	}
	b, sent := msg[pieceHead:], binary.LittleEndian.Uint32(msg)
	if c := crc32c.Checksum(b); c != sent {
		return nil, fmt.Errorf("%s arrived with CRC32C %08x, sent with %08x", what(), c, sent)
	}
	return b, nil
}

// fetchOnce asks node for the range of the file req names (all of it for a
// copy) and writes it into r's copy.
func (n *Namespace) fetchOnce(ctx context.Context, r *Remote, req readReq, node int) error {
	want := r.e.Meta.Size - req.Offset
	if req.Length > 0 {
		want = req.Length
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req.Stream = "ns/" + jobnet.NewToken()
	recv := make(chan error, 1)
	go func() {
		// A partner's copy, and a whole file, may be checked only as the
		// holder sends them: their pieces count once the call succeeded;
		// and a piece of a file several members wrote once every piece of
		// its blocks is here (shared.go).
		recv <- n.receive(ctx, r, node, req.Stream, req.Offset, want, req.Length > 0 && !r.e.Shared())
	}()
	var rep readReply
	if err := n.net.Call(ctx, node, "read", req, &rep); err != nil {
		cancel()
		<-recv
		return err
	}
	if err := <-recv; err != nil {
		return err
	}
	switch {
	case rep.Size != want:
		return fmt.Errorf("%s/%s from node %d: %d bytes at %d, the record says %d", r.dataset, req.Path, node, rep.Size, req.Offset, want)
	}
	return nil
}
