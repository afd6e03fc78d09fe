// Package migrations embeds the golang-migrate SQL files that define the
// receiver's schema. They are applied at start-up (see internal/db.Migrate)
// and by `server migrate`.
package migrations

import "embed"

// FS holds every NNNNNN_name.{up,down}.sql file of this folder.
//
//go:embed *.sql
var FS embed.FS
