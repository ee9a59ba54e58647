package busarchive

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// readManifest parses a.raw into a.manifest and checks it against the
// entries the tar holds. It returns every problem found.
func (a *Archive) readManifest() []error {
	var problems []error
	add := func(name string, kind error, detail string) {
		problems = append(problems, &EntryError{Entry: name, Kind: kind, Detail: detail})
	}
	if err := checkSeal(a.raw); err != nil {
		problems = append(problems, err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(a.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		add(ManifestName, ErrFormat, fmt.Sprintf("manifest.json is not the JSON of a format %d manifest: %v", FormatVersion, err))
		return problems
	}
	if m.Format != FormatVersion {
		add(ManifestName, ErrFormat, fmt.Sprintf("the manifest is of format %d; this reader knows format %d", m.Format, FormatVersion))
		return problems
	}
	if len(m.Streams) > MaxStreams {
		add(ManifestName, ErrTooLarge, fmt.Sprintf("the manifest names %d streams, over the bound of %d", len(m.Streams), MaxStreams))
		return problems
	}
	named := map[string]bool{}
	seen := map[string]bool{}
	for i := range m.Streams {
		s := &m.Streams[i]
		if !ValidStreamName(s.Name) {
			add(ManifestName, ErrLayout, fmt.Sprintf("stream %d of the manifest has the invalid name %q", i+1, printable(s.Name)))
			continue
		}
		if seen[s.Name] {
			add(DataEntry(s.Name), ErrLayout, "the manifest names this stream twice")
			continue
		}
		seen[s.Name] = true
		if s.Config.Name != s.Name {
			add(MetaEntry(s.Name), ErrFormat, fmt.Sprintf("the manifest gives stream %s the configuration of stream %q", s.Name, printable(s.Config.Name)))
		}
		if len(s.Entries) != 2 || s.Entries[0].Name != DataEntry(s.Name) || s.Entries[1].Name != MetaEntry(s.Name) {
			add(DataEntry(s.Name), ErrFormat, "the manifest does not list exactly the stream's stream.arc.s2 and backup.json")
			continue
		}
		for _, e := range s.Entries {
			named[e.Name] = true
			a.checkSum(e, &problems)
		}
	}
	for name := range a.entries {
		if !named[name] {
			add(name, ErrLayout, "the manifest does not name this entry")
		}
	}
	if len(problems) == 0 {
		a.manifest = &m
	}
	return problems
}

// checkSum checks one manifest entry's declared size and hash form against
// the tar.
func (a *Archive) checkSum(e EntrySum, problems *[]error) {
	add := func(kind error, detail string) {
		*problems = append(*problems, &EntryError{Entry: e.Name, Kind: kind, Detail: detail})
	}
	bound := MaxDataSize
	if e.Name == MetaEntry(streamOf(e.Name)) {
		bound = MaxMetaSize
	}
	if e.Size < 0 || e.Size > bound {
		add(ErrTooLarge, fmt.Sprintf("the manifest declares %d bytes, outside the bound of 0 to %d", e.Size, bound))
		return
	}
	if b, err := hex.DecodeString(e.SHA256); err != nil || len(b) != 32 || e.SHA256 != hex.EncodeToString(b) {
		add(ErrFormat, fmt.Sprintf("the manifest's SHA-256 %q is not 64 lower-case hex digits", printable(e.SHA256)))
	}
	loc, ok := a.entries[e.Name]
	if !ok {
		add(ErrIncomplete, "the manifest names this entry but the archive lacks it")
		return
	}
	if loc.size != e.Size {
		add(ErrChecksum, fmt.Sprintf("the entry holds %d bytes but the manifest declares %d", loc.size, e.Size))
	}
}

// streamOf is the stream part of a layout entry name, or "".
func streamOf(entry string) string {
	s, _, err := parseEntryName(entry)
	if err != nil {
		return ""
	}
	return s
}
