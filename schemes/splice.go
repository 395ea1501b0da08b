package schemes

import (
	"encoding/binary"
	"fmt"
)

// Receiving pieces straight into files. What a member stores as it comes
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

// recvToLogical receives piece tag, ln bytes, from rank src into the
// logical file lw at off: spliced into its file when the piece lies inside
// one, with the sender's CRC32C going to lw's tracker; else received into
// rbuf and written with writeAt (which also checks that padding is zero).
// It returns the buffer to reuse.
func (s *session) recvToLogical(src int, tag uint32, ln int, lw *logicalFile, off int64, rbuf []byte) ([]byte, error) {
	if fr := s.fileReceiver(src); fr != nil && lw.crcs != nil {
		if i, in, ok := lw.within(off, ln); ok {
			f, err := lw.file(i)
			if err != nil {
				return rbuf, err
			}
			head := make([]byte, crcFrameLen)
			msg, err := fr.RecvToFile(s.ctx, head, f, in, ln)
			crc, ok, err := s.spliced(src, msg, head, err, tag, ln)
			if err != nil {
				return rbuf, err
			}
			if ok {
				lw.crcs.addCRC(i, in, int64(ln), crc)
				return rbuf, nil
			}
			// A whole message: the sender is on the copy path.
			if msg, err = s.checkRecv(src, msg, nil, msgData, tag, ln); err != nil {
				return rbuf, err
			}
			return rbuf, lw.writeAt(msg[frameLen:], off)
		}
	}
	msg, err := s.recv(src, msgData, tag, rbuf, ln)
	if err != nil {
		return rbuf, err
	}
	return msg, lw.writeAt(msg[frameLen:], off)
}

// recvToCopy receives piece tag, ln bytes, of a copy of another member's
// logical file from rank src, at offset off of that file, into the next ln
// bytes of segment seg of w; track follows that member's files, so their
// CRC32Cs can be checked once the copy is whole. The piece is spliced when
// it starts a block of w and lies inside one of the member's files (the
// sender's CRC then serves both), else received into rbuf. It returns the
// buffer to reuse.
func (s *session) recvToCopy(src int, tag uint32, ln int, w *redWriter, seg int, track *logicalFile, off int64, rbuf []byte) ([]byte, error) {
	if fr := s.fileReceiver(src); fr != nil && w.canSplice(seg, ln) {
		if i, in, ok := track.within(off, ln); ok {
			at, err := w.at(seg, ln)
			if err != nil {
				return rbuf, err
			}
			head := make([]byte, crcFrameLen)
			msg, err := fr.RecvToFile(s.ctx, head, w.f, at, ln)
			crc, ok, err := s.spliced(src, msg, head, err, tag, ln)
			if err != nil {
				return rbuf, err
			}
			if ok {
				track.crcs.addCRC(i, in, int64(ln), crc)
				return rbuf, w.spliced(seg, ln, crc)
			}
			if msg, err = s.checkRecv(src, msg, nil, msgData, tag, ln); err != nil {
				return rbuf, err
			}
			track.track(msg[frameLen:], off)
			return rbuf, w.write(seg, msg[frameLen:])
		}
	}
	msg, err := s.recv(src, msgData, tag, rbuf, ln)
	if err != nil {
		return rbuf, err
	}
	track.track(msg[frameLen:], off)
	return msg, w.write(seg, msg[frameLen:])
}

// recvToSegment receives piece tag, ln bytes, from rank src into the next
// ln bytes of segment seg of w: spliced when the link can write into files
// and the piece starts a block (the sender's CRC32C in its frame becomes
// the block's), else received into rbuf and written. It returns the buffer
// to reuse.
func (s *session) recvToSegment(src int, tag uint32, ln int, w *redWriter, seg int, rbuf []byte) ([]byte, error) {
	if fr := s.fileReceiver(src); fr != nil && w.canSplice(seg, ln) {
		at, err := w.at(seg, ln)
		if err != nil {
			return rbuf, err
		}
		head := make([]byte, crcFrameLen)
		msg, err := fr.RecvToFile(s.ctx, head, w.f, at, ln)
		crc, ok, err := s.spliced(src, msg, head, err, tag, ln)
		if err != nil {
			return rbuf, err
		}
		if ok {
			return rbuf, w.spliced(seg, ln, crc)
		}
		if msg, err = s.checkRecv(src, msg, nil, msgData, tag, ln); err != nil {
			return rbuf, err
		}
		return rbuf, w.write(seg, msg[frameLen:])
	}
	msg, err := s.recv(src, msgData, tag, rbuf, ln)
	if err != nil {
		return rbuf, err
	}
	return msg, w.write(seg, msg[frameLen:])
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
