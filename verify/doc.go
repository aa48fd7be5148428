// Package verify compares a re-keyed table with the snapshot it was made
// from, entity by entity: the step every re-key guide ends with.
//
// For each chosen entity (the heaviest by cells and by bytes, a uniform
// sample, named ones, or all), it reads only the entity's key ranges on both
// sides: on the old side the snapshot's store files are sought to the range
// the old layout gives the entity; on the new side the range the new layout
// gives it, with a salt computed from the entity, never a scan of every
// bucket (transform.Program.SourceRange and TargetRange). A side whose
// layout does not lead with the entity (a re-key that puts the time first)
// is read whole, once, picking out the chosen entities' cells.
//
// When the new key keeps every old field, the comparison is the inverse
// (Method Inverse): every new cell is read back to the old cell it was made
// from (transform.Rekey.Unmap) and compared with the old cells as they
// are, so a bug in the forward mapping shows instead of being computed
// again. Otherwise, or when asked (Forward), old cells are mapped through
// the job's transform and compared with the new cells; Both runs the two.
// Each side yields rows, cells, bytes and an order-independent digest of
// its cells in the one layout. Sides that disagree are read again cell by
// cell and every difference is classified: missing in new, extra in new,
// value differs, extra versions, mapped wrong, expired by TTL. New cells
// newer than the snapshot (dual writes) are counted apart.
//
// The entities come from the old side, so a comparison of chosen entities
// cannot see an entity only the new side has. CompareAll, for a check of
// every entity, reads the new side whole in its first pass (the gaps
// between the entities' new ranges with the ranges) and reports such
// entities as results of their own, and the cells no entity can be given
// as Outside.
//
// The Report prints as a table (worst first), JSON (with the key ranges to
// redo) or one self-contained HTML page.
//
// Prepare assembles the check rekey verify runs from a job file: the job's
// verify section with Options applied, the entities chosen, both sides
// open (the live table's cluster found by hbase.Locate); Check.Run
// compares and returns the Report. Compare, Choice, Count and the readers
// are the parts, for a check assembled otherwise.
package verify
