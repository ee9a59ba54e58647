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
	var problems []error
	add := func(name string, kind error, detail string) {
		problems = append(problems, &EntryError{Entry: name, Kind: kind, Detail: detail})
	}
	cache := newScanCache(a.r, a.size)
	sr := io.NewSectionReader(cache, 0, a.size)
	tr := tar.NewReader(sr)
	manifestAt := int64(-1)
	for count := 0; ; count++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				add("", ErrIncomplete, "the archive ends inside an entry: it is truncated")
				return problems
			}
			add("", ErrFormat, fmt.Sprintf("the tar cannot be read after %d entries: %v", count, err))
			if manifestAt < 0 {
				add(ManifestName, ErrIncomplete, "no manifest.json was found before the tar became unreadable")
			}
			return problems
		}
		name := printable(hdr.Name)
		if count >= maxEntries {
			add(name, ErrTooLarge, fmt.Sprintf("the archive holds more than %d entries", maxEntries))
			return problems
		}
		off, _ := sr.Seek(0, io.SeekCurrent)
		if manifestAt >= 0 {
			add(name, ErrLayout, "the entry comes after manifest.json, which must be last")
		}
		if hdr.Typeflag != tar.TypeReg {
			add(name, ErrLayout, fmt.Sprintf("the entry is not a regular file (tar type %q)", hdr.Typeflag))
			continue
		}
		stream, file, err := parseEntryName(hdr.Name)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		bound := MaxDataSize
		switch file {
		case ManifestName:
			bound = MaxManifestSize
		case MetaName:
			bound = MaxMetaSize
		}
		switch {
		case hdr.Size < 0 || hdr.Size > bound:
			add(name, ErrTooLarge, fmt.Sprintf("the tar header gives a size of %d bytes, over the bound of %d", hdr.Size, bound))
			return problems
		case hdr.Size > a.size-off:
			add(name, ErrIncomplete, fmt.Sprintf("the entry claims %d bytes but the archive ends %d bytes after its start: it is truncated", hdr.Size, a.size-off))
			return problems
		}
		if file == ManifestName {
			if manifestAt >= 0 {
				add(name, ErrLayout, "the archive holds manifest.json twice")
				continue
			}
			manifestAt = off
			a.raw = make([]byte, hdr.Size)
			if _, err := io.ReadFull(tr, a.raw); err != nil {
				add(name, ErrIncomplete, fmt.Sprintf("manifest.json cannot be read whole: %v", err))
				a.raw = nil
				return problems
			}
			continue
		}
		entry := StreamsDir + "/" + stream + "/" + file
		if _, dup := a.entries[entry]; dup {
			add(entry, ErrLayout, "the archive holds this entry twice")
			continue
		}
		a.entries[entry] = location{off: off, size: hdr.Size}
	}
	if manifestAt < 0 {
		add(ManifestName, ErrIncomplete, "the archive has no manifest.json, so it was never committed")
		return problems
	}
	// After the end-of-archive marker only the zero padding of a tar record may follow.
	end, _ := sr.Seek(0, io.SeekCurrent)
	if rest := a.size - end; rest > 0 {
		if rest >= 20*blockSize || !allZero(io.NewSectionReader(cache, end, rest)) {
			add("", ErrLayout, fmt.Sprintf("%d bytes follow the end of the archive", rest))
		}
	}
	return problems
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
