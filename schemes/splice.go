package schemes

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/scrfs/scrfs/internal/crc32c"
	"github.com/scrfs/scrfs/redfile"
)

// Pieces that go straight into files. What a member stores as it comes
// (a PARTNER copy, a finished XOR parity or RS checksum, everything a
// rebuild's lost member receives) arrives on the zero-copy path with its
// CRC32C in the frame (msgDataCRC), and the link moves the payload from the
// socket into the staged file or the redundancy file inside the kernel
// (FileReceiver); the sender's CRC goes to the file's checks (and the
// block's, in a redundancy file). That saves the receiver — for a rebuild,
// the lost member, its bottleneck — a copy into user space, a CRC pass and
// the pwrite's copy. A piece that cannot go that way (a sender on the copy
// path, a piece that spans files, a block the piece does not start) is
// received into a buffer and written, with identical results.

// sendPiece queues one piece that its receivers store as it is (a PARTNER
// copy, a finished XOR parity or RS checksum, what a rebuild's lost member
// stores) to every rank in to, framed once, before any sender can be
// reading it. On the zero-copy path its CRC32C goes in the frame, so a
// receiver can splice it into its file unseen; otherwise it goes as a
// plain framed buffer. done runs once per rank, when the piece has left
// for it.
func (s *session) sendPiece(to []int, tag uint32, pc span, done func()) error {
	var head []byte
	if s.zeroCopy {
		if !pc.hasCRC {
			pc.crc = crc32c.Checksum(pc.payload())
		}
		head = crcFrame(tag, pc.crc)
	} else {
		frame(pc.buf, msgData, tag)
	}
	for _, r := range to {
		var err error
		if head != nil {
			err = s.enqueueParts(r, head, pc.payload(), done)
		} else {
			err = s.enqueue(r, pc.buf, done)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// recvToLogical receives piece tag, ln bytes, from rank src into the
// logical file lw at off: spliced into its file when the piece lies inside
// one, with the sender's CRC32C going to lw's tracker; else received and
// written with writeAt (which also checks that padding is zero). It
// returns the buffer to reuse.
func (s *session) recvToLogical(src int, tag uint32, ln int, lw *logicalFile, off int64, rbuf []byte) ([]byte, error) {
	var into *os.File
	i, in, ok := lw.within(off, ln)
	if ok && lw.crcs != nil {
		f, err := lw.file(i)
		if err != nil {
			return rbuf, err
		}
		into = f
	}
	return s.recvPiece(src, tag, ln, rbuf, into, in,
		func(crc uint32) error { lw.crcs.addCRC(i, in, int64(ln), crc); return nil },
		func(p []byte) error { return lw.writeAt(p, off) })
}

// recvToCopy receives piece tag, ln bytes, of a copy of another member's
// logical file from rank src, at offset off of that file, into the next ln
// bytes of segment seg of w; track follows that member's files, so their
// CRC32Cs can be checked once the copy is whole. The piece is spliced when
// it starts a block of w and lies inside one of the member's files (the
// sender's CRC then serves both). It returns the buffer to reuse.
func (s *session) recvToCopy(src int, tag uint32, ln int, w *redfile.Writer, seg int, track *logicalFile, off int64, rbuf []byte) ([]byte, error) {
	var into *os.File
	var at int64
	i, in, ok := track.within(off, ln)
	if ok && w.CanSplice(seg, ln) {
		var err error
		if at, err = w.At(seg, ln); err != nil {
			return rbuf, err
		}
		into = w.File()
	}
	return s.recvPiece(src, tag, ln, rbuf, into, at,
		func(crc uint32) error { track.crcs.addCRC(i, in, int64(ln), crc); return w.Spliced(seg, ln, crc) },
		func(p []byte) error { track.track(p, off); return w.Write(seg, p) })
}

// recvToSegment receives piece tag, ln bytes, from rank src into the next
// ln bytes of segment seg of w: spliced when the piece starts a block (the
// sender's CRC32C in its frame becomes the block's). It returns the buffer
// to reuse.
func (s *session) recvToSegment(src int, tag uint32, ln int, w *redfile.Writer, seg int, rbuf []byte) ([]byte, error) {
	var into *os.File
	var at int64
	if w.CanSplice(seg, ln) {
		var err error
		if at, err = w.At(seg, ln); err != nil {
			return rbuf, err
		}
		into = w.File()
	}
	return s.recvPiece(src, tag, ln, rbuf, into, at,
		func(crc uint32) error { return w.Spliced(seg, ln, crc) },
		func(p []byte) error { return w.Write(seg, p) })
}

// recvPiece receives piece tag, ln bytes, from rank src. With a file to go
// into and a link that can write into files, a piece that carries its
// sender's CRC32C is spliced into it at at, and spliced records that CRC;
// any other piece (a sender on the copy path, no file given) is received,
// into rbuf (taken from the pool when nil, so that a member whose pieces
// are all spliced holds no buffer for them), and its payload handed to
// store. It returns the buffer to reuse, which the caller gives back.
func (s *session) recvPiece(src int, tag uint32, ln int, rbuf []byte, into *os.File, at int64,
	spliced func(crc uint32) error, store func(payload []byte) error) ([]byte, error) {
	if fr := s.fileReceiver(src); fr != nil && into != nil {
		head := make([]byte, crcFrameLen)
		msg, err := fr.RecvToFile(s.ctx, head, into, at, ln)
		crc, ok, err := s.spliced(src, msg, head, err, tag, ln)
		if err != nil {
			return rbuf, err
		}
		if ok {
			return rbuf, spliced(crc)
		}
		// A whole message: the sender is on the copy path.
		if msg, err = s.checkRecv(src, msg, nil, msgData, tag, ln); err != nil {
			return rbuf, err
		}
		return rbuf, store(msg[frameLen:])
	}
	if rbuf == nil {
		rbuf = s.pool.get(0)
	}
	msg, err := s.recv(src, msgData, tag, rbuf, ln)
	if err != nil {
		return rbuf, err
	}
	return msg, store(msg[frameLen:])
}

// fileReceiver returns the link to src as a FileReceiver when the session
// is on the zero-copy path and the link can write into files, else nil.
func (s *session) fileReceiver(src int) FileReceiver {
	if !s.zeroCopy {
		return nil
	}
	pl, err := s.peer(src)
	if err != nil {
		return nil // the receive that follows reports it
	}
	fr, _ := pl.conn.(FileReceiver)
	return fr
}

// spliced interprets what RecvToFile returned for a piece: ok with the
// sender's CRC32C when the payload went into the file, !ok when msg is a
// whole message for checkRecv, or an error (a transport failure, or a
// spliced piece out of order).
func (s *session) spliced(src int, msg, head []byte, err error, tag uint32, ln int) (uint32, bool, error) {
	if err != nil {
		_, err = s.checkRecv(src, nil, err, msgData, tag, ln)
		return 0, false, err
	}
	if len(msg) != crcFrameLen || &msg[0] != &head[0] {
		return 0, false, nil
	}
	if got := binary.LittleEndian.Uint32(msg[4:]); msg[0] != msgDataCRC || got != tag {
		return 0, false, s.fail(&PeerError{Rank: src, Err: fmt.Errorf("%w: got message kind %d tag %d, want a piece with its CRC, tag %d",
			ErrProtocol, msg[0], got, tag)})
	}
	s.recvd.Add(int64(crcFrameLen + ln))
	return binary.LittleEndian.Uint32(msg[frameLen:]), true, nil
}
