package busarchive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
)

// Archive is an opened bus.tar. Its methods read the archive through the
// io.ReaderAt given to Open, which must stay open and unchanged while the
// Archive is used: a file, or an object in a store. When it also reads
// ranges front to back (Reader(ctx, off, n) (io.ReadCloser, error), as a
// store.Object does), each entry's data is read with one such read. An
// Archive is safe for concurrent use.
type Archive struct {
	r        io.ReaderAt
	size     int64
	manifest *Manifest
	raw      []byte              // manifest.json as read
	entries  map[string]location // every entry but the manifest

	mu       sync.Mutex
	verified map[string]uint32 // stream: CRC-32C of its data entry as a Verify read it and found it matching the manifest
}

// location is where one entry's data lies in the archive.
type location struct {
	off, size int64
}

// Open reads the tar headers of r (seeking over the data), checks the layout
// and reads the manifest. It does not read the data: see Verify.
//
// Open refuses (with every problem it found joined, each an *EntryError) an
// archive with a non-regular entry, a name outside the layout, a duplicate,
// an entry after manifest.json, a missing manifest (ErrIncomplete), a
// truncated entry (ErrIncomplete), sizes over the bounds (ErrTooLarge), a
// manifest whose seal does not match (ErrChecksum) or that it cannot read
// (ErrFormat), an entry the manifest does not name or a named entry the tar
// lacks, and an entry whose size differs from the manifest's (ErrChecksum).
func Open(r io.ReaderAt, size int64) (*Archive, error) {
	if size < 0 {
		return nil, &EntryError{Kind: ErrFormat, Detail: fmt.Sprintf("the archive's size is negative (%d)", size)}
	}
	a := &Archive{r: r, size: size, entries: map[string]location{}}
	problems := a.scan()
	if a.raw != nil {
		problems = append(problems, a.readManifest()...)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return a, nil
}

// scan walks the tar headers, seeking over the data, and reads manifest.json,
// through a read-ahead cache (scanCache): the reads are many and small.
func (a *Archive) scan() []error {
	cache := newScanCache(a.r, a.size)
	s := &tarScan{a: a, sr: io.NewSectionReader(cache, 0, a.size), manifestAt: -1}
	s.tr = tar.NewReader(s.sr)
	for count := 0; ; count++ {
		hdr, err := s.tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.unreadable(count, err)
			return s.problems
		}
		if !s.entry(hdr, count) {
			return s.problems
		}
	}
	if s.manifestAt < 0 {
		s.add(ManifestName, ErrIncomplete, "the archive has no manifest.json, so it was never committed")
		return s.problems
	}
	// After the end-of-archive marker only the zero padding of a tar record may follow.
	end, _ := s.sr.Seek(0, io.SeekCurrent)
	if rest := a.size - end; rest > 0 {
		if rest >= 20*blockSize || !allZero(io.NewSectionReader(cache, end, rest)) {
			s.add("", ErrLayout, fmt.Sprintf("%d bytes follow the end of the archive", rest))
		}
	}
	return s.problems
}

// tarScan is one scan of an archive's tar headers: where it stands, where
// manifest.json began (-1 until it is met), and the problems found so far.
type tarScan struct {
	a          *Archive
	sr         *io.SectionReader
	tr         *tar.Reader
	manifestAt int64
	problems   []error
}

func (s *tarScan) add(name string, kind error, detail string) {
	s.problems = append(s.problems, &EntryError{Entry: name, Kind: kind, Detail: detail})
}

// unreadable records why the tar could not be read past count entries.
func (s *tarScan) unreadable(count int, err error) {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		s.add("", ErrIncomplete, "the archive ends inside an entry: it is truncated")
		return
	}
	s.add("", ErrFormat, fmt.Sprintf("the tar cannot be read after %d entries: %v", count, err))
	if s.manifestAt < 0 {
		s.add(ManifestName, ErrIncomplete, "no manifest.json was found before the tar became unreadable")
	}
}

// entry checks the header of the archive's entry number count and records
// where its data lies, or reads it when it is manifest.json; false says the
// scan cannot go on past it.
func (s *tarScan) entry(hdr *tar.Header, count int) bool {
	name := printable(hdr.Name)
	if count >= maxEntries {
		s.add(name, ErrTooLarge, fmt.Sprintf("the archive holds more than %d entries", maxEntries))
		return false
	}
	off, _ := s.sr.Seek(0, io.SeekCurrent)
	if s.manifestAt >= 0 {
		s.add(name, ErrLayout, "the entry comes after manifest.json, which must be last")
	}
	if hdr.Typeflag != tar.TypeReg {
		s.add(name, ErrLayout, fmt.Sprintf("the entry is not a regular file (tar type %q)", hdr.Typeflag))
		return true
	}
	stream, file, err := parseEntryName(hdr.Name)
	if err != nil {
		s.problems = append(s.problems, err)
		return true
	}
	if !s.sizeFits(name, file, hdr.Size, off) {
		return false
	}
	if file == ManifestName {
		return s.manifest(name, off, hdr.Size)
	}
	entry := StreamsDir + "/" + stream + "/" + file
	if _, dup := s.a.entries[entry]; dup {
		s.add(entry, ErrLayout, "the archive holds this entry twice")
		return true
	}
	s.a.entries[entry] = location{off: off, size: hdr.Size}
	return true
}

// sizeFits checks an entry's size, from its header, against the bound of
// its kind of file and against the bytes the archive holds after off.
func (s *tarScan) sizeFits(name, file string, size, off int64) bool {
	bound := MaxDataSize
	switch file {
	case ManifestName:
		bound = MaxManifestSize
	case MetaName:
		bound = MaxMetaSize
	}
	switch {
	case size < 0 || size > bound:
		s.add(name, ErrTooLarge, fmt.Sprintf("the tar header gives a size of %d bytes, over the bound of %d", size, bound))
		return false
	case size > s.a.size-off:
		s.add(name, ErrIncomplete, fmt.Sprintf("the entry claims %d bytes but the archive ends %d bytes after its start: it is truncated", size, s.a.size-off))
		return false
	}
	return true
}

// manifest reads manifest.json, of size bytes at off, into the archive's
// raw manifest; a second one is a problem, and one that cannot be read
// whole ends the scan.
func (s *tarScan) manifest(name string, off, size int64) bool {
	if s.manifestAt >= 0 {
		s.add(name, ErrLayout, "the archive holds manifest.json twice")
		return true
	}
	s.manifestAt = off
	s.a.raw = make([]byte, size)
	if _, err := io.ReadFull(s.tr, s.a.raw); err != nil {
		s.add(name, ErrIncomplete, fmt.Sprintf("manifest.json cannot be read whole: %v", err))
		s.a.raw = nil
		return false
	}
	return true
}

// allZero reports whether r (at most a few KiB) reads as zero bytes.
func allZero(r io.Reader) bool {
	buf := make([]byte, blockSize)
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != 0 {
				return false
			}
		}
		if err != nil {
			return err == io.EOF
		}
	}
}

// OpenFile opens the bus.tar at path without following a symlink. Close it.
// A path whose last element is a symlink, or that is not a regular file, is
// refused (nothing is read through it).
func OpenFile(path string) (*Archive, io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, &EntryError{Kind: ErrLayout, Detail: fmt.Sprintf("%s is a symbolic link, which is never followed, so it was not opened", path)}
		}
		return nil, nil, fmt.Errorf("open the archive: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat the archive %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &EntryError{Kind: ErrLayout, Detail: fmt.Sprintf("%s is not a regular file (%s), so it was not read", path, st.Mode().Type())}
	}
	a, err := Open(f, st.Size())
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return a, f, nil
}

// Manifest is the archive's manifest. The caller must not change it.
func (a *Archive) Manifest() *Manifest { return a.manifest }

// Streams are the archive's streams, in archive order.
func (a *Archive) Streams() []string {
	out := make([]string, len(a.manifest.Streams))
	for i, s := range a.manifest.Streams {
		out[i] = s.Name
	}
	return out
}

// Size is the size of the archive Open was given.
func (a *Archive) Size() int64 { return a.size }

// StreamData reads streams/<stream>/stream.arc.s2 straight from the tar,
// front to back: from a file, straight from the disk where the file system
// allows (O_DIRECT), else through the page cache with readahead and
// drop-behind; from an archive that reads ranges (a store.Object), in one
// ranged read. Close it.
func (a *Archive) StreamData(stream string) (io.ReadCloser, error) {
	if a.manifest.Stream(stream) != nil {
		loc := a.entries[DataEntry(stream)]
		if src := openDirect(a.r, loc.off, loc.size); src != nil {
			return &blockReader{src: src, buf: alignedBlock()}, nil
		}
	}
	return a.section(stream, DataEntry(stream))
}

// StreamMeta reads streams/<stream>/backup.json straight from the tar.
func (a *Archive) StreamMeta(stream string) (io.ReadCloser, error) {
	return a.section(stream, MetaEntry(stream))
}

func (a *Archive) section(stream, entry string) (io.ReadCloser, error) {
	if a.manifest.Stream(stream) == nil {
		return nil, &EntryError{Entry: printable(entry), Kind: ErrNoStream, Detail: fmt.Sprintf("the archive holds no stream %q", printable(stream))}
	}
	loc := a.entries[entry]
	if rc, ok, err := entryReader(context.Background(), a.r, loc.off, loc.size); ok {
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", entry, err)
		}
		return rc, nil
	}
	return newSeqReader(a.r, loc.off, loc.size), nil
}
