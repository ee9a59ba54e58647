// Package transfer owns moving kept data between a keeper's store and what
// lies outside it, as free functions over store.Store and the archive:
// CopyStores copies the committed points and asides of one store into
// another (each archive verified in the target before its record, the
// commit mark, is written); ExportKept writes a point or an aside out as
// `nats backup` directories; CheckBackups and FromBackups read `nats backup`
// directories for an import, checking each whole before anything is
// written. Recording an imported point (its lease, its archive, its record,
// the index and the act) is the engine's step, Keeper.ImportKept, which
// calls these.
//
// It reads the store directly, with no index, no bus and no act, so it runs
// wherever a store can be opened (the CLI's copy and export). It imports the
// contract (kept), the store's layout (keeper/layout), the archive opener
// (keeper/archives), the store, busarchive and agecrypt; never the engine,
// package keeper, which imports it.
package transfer
