package hfiles

import (
	"errors"
	"fmt"
	"path"
	"syscall"

	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/vfs"
)

// FullError reports a staging folder whose file system ran out of room
// (no space left, or over a disk quota) while the sink wrote to it, with
// what the folder needs. It matches ErrStagingFull. Nothing of the job is
// loaded by then: the split or merge that failed is redone by a resumed
// run, once there is room.
type FullError struct {
	// Folder is the staging folder, as given.
	Folder string
	// While says what the sink was doing: "spilling split ...",
	// "merging region ... family ...".
	While string
	// Held is the bytes of the job's files in the folder when it failed.
	Held int64
	// Free is what the file system had left for the sink then, when known
	// (local folders); -1 otherwise.
	Free int64
	// Need estimates the bytes the job's staging holds at its peak (every
	// run and every HFile, before the runs are removed); 0 when there is
	// nothing to estimate it from. Basis says how it was estimated.
	Need  int64
	Basis string
	// Err is the file system's error.
	Err error
}

func (e *FullError) Error() string {
	free := "unknown free space"
	if e.Free >= 0 {
		free = human.Bytes(e.Free) + " free"
	}
	need := ""
	if e.Need > 0 {
		need = fmt.Sprintf("; the job needs about %s there at its peak, %s more than it holds (%s)", human.Bytes(e.Need), human.Bytes(max(e.Need-e.Held, 0)), e.Basis)
	}
	return fmt.Sprintf("hfiles: staging folder %s is full while %s: it holds %s of this job's files, with %s%s; nothing was loaded: free space there (or stage elsewhere), then run again with --resume: %v",
		e.Folder, e.While, human.Bytes(e.Held), free, need, e.Err)
}

// Unwrap gives the file system's error.
func (e *FullError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStagingFull) match.
func (e *FullError) Is(target error) bool { return target == ErrStagingFull }

// isFull reports whether err is a file system out of room.
func isFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// full turns an out-of-room error met while doing what into a FullError;
// other errors (and nil) come back as they are.
func (s *Sink) full(err error, while string) error {
	var fe *FullError
	if !isFull(err) || errors.As(err, &fe) {
		return err
	}
	e := &FullError{Folder: s.loc.URL, While: while, Held: s.staged.Load() + s.openHFiles.Load(), Free: -1, Err: err}
	if n, ok := vfs.Available(s.fs, s.root); ok {
		e.Free = n
	}
	e.Need, e.Basis = s.needEstimate()
	return e
}

// needEstimate estimates the staging folder's peak: every run of the job
// and every HFile merged from them, before the runs are removed, and the
// HFiles the splits wrote themselves (direct.go). Runs are
// what the committed splits staged; HFiles are taken at the bytes per
// cell byte of the partitions merged so far, or as large as their cells
// before any is. Both are scaled from the source bytes of the committed
// splits to Options.SourceBytes, the whole run's. Before any split
// committed, runs and HFiles are each taken as large as the source's
// store files.
func (s *Sink) needEstimate() (int64, string) {
	recs, err := readSplits(s.fs, path.Join(s.root, s.spill))
	if err != nil {
		return 0, ""
	}
	var runBytes, cellBytes, srcBytes, segBytes int64
	partCells := map[string]int64{}
	for _, r := range recs {
		srcBytes += r.SourceBytes
		for _, sg := range r.Segments {
			segBytes += sg.Size
		}
		for _, f := range r.Runs {
			if f.Local == "" { // runs in a local run folder take no room here
				runBytes += f.Size
			}
			for _, p := range f.Parts {
				cellBytes += p.Bytes
				partCells[partKey(p.Region, p.Family)] += p.Bytes
			}
		}
	}
	if runBytes == 0 && cellBytes == 0 && segBytes == 0 {
		if s.o.SourceBytes <= 0 {
			return 0, ""
		}
		if s.local != nil {
			return s.o.SourceBytes, fmt.Sprintf("no split staged yet: HFiles taken as large as the %s of source store files (the runs go to %s)", human.Bytes(s.o.SourceBytes), s.local.root)
		}
		return 2 * s.o.SourceBytes, fmt.Sprintf("no split staged yet: runs and HFiles each taken as large as the %s of source store files", human.Bytes(s.o.SourceBytes))
	}
	perCell, hfBasis := 1.0, "HFiles taken as large as their cells"
	var st finishState
	if found, err := readJSON(s.fs, path.Join(s.root, s.state), &st); err == nil && found {
		var hf, cells int64
		for k, ps := range st.Parts {
			if ps.Done {
				for _, f := range ps.Files {
					hf += f.Size
				}
				cells += partCells[k]
			}
		}
		if hf > 0 && cells > 0 {
			perCell = float64(hf) / float64(cells)
			hfBasis = fmt.Sprintf("HFiles of %.2f bytes per cell byte, as merged so far", perCell)
		}
	}
	scale, scaleBasis := 1.0, ""
	if s.o.SourceBytes > srcBytes && srcBytes > 0 {
		scale = float64(s.o.SourceBytes) / float64(srcBytes)
		scaleBasis = fmt.Sprintf(", scaled from the %s of source staged to the run's %s", human.Bytes(srcBytes), human.Bytes(s.o.SourceBytes))
	}
	need := scale * (float64(runBytes) + float64(segBytes) + perCell*float64(cellBytes))
	segBasis := ""
	if segBytes > 0 {
		// A split's own HFiles are adopted as they are when their
		// partitions allow, else merged again (then twice their size at
		// the peak, for the partitions that are).
		segBasis = fmt.Sprintf(", %s of HFiles written by the splits", human.Bytes(segBytes))
	}
	return int64(need), fmt.Sprintf("%s of runs and %s of cells staged%s, %s%s", human.Bytes(runBytes), human.Bytes(cellBytes), segBasis, hfBasis, scaleBasis)
}
