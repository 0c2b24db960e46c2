package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/spf13/pflag"
)

// sourceParams choose what oncesync reads: the generated CSV (the default)
// or the same contacts in a MySQL/MariaDB table (--source mysql). The
// baseline always reads the CSV, so with --source mysql its figure is the
// CSV one, printed next to oncesync's MySQL figure.
type sourceParams struct {
	Source   string
	MySQLURL string
	// table is the loaded table's DSN ("" until loaded) and drop removes
	// its database.
	dsn  string
	drop func()
}

func addSourceFlags(fs *pflag.FlagSet, p *sourceParams) {
	fs.StringVar(&p.Source, "source", "csv", "what oncesync reads: csv, or mysql (the same contacts in a table of a throwaway database on --mysql-url)")
	fs.StringVar(&p.MySQLURL, "mysql-url", "mysql://root@127.0.0.1:3306/", "with --source mysql: the server (mysql://USER[:PASSWORD]@HOST:PORT/)")
}

func (p *sourceParams) check() error {
	if p.Source != "csv" && p.Source != "mysql" {
		return fmt.Errorf("%w: --source must be csv or mysql", errUsage)
	}
	return nil
}

// setupSource loads the contacts into a MySQL table when --source mysql.
func (b *bench) setupSource(ctx context.Context) error {
	if b.Source != "mysql" {
		return nil
	}
	u, err := url.Parse(b.MySQLURL)
	if err != nil || u.Scheme != "mysql" || u.Host == "" {
		return fmt.Errorf("%w: --mysql-url must be mysql://USER[:PASSWORD]@HOST:PORT/", errUsage)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	name := "oncesync_bench_" + hex.EncodeToString(r[:])
	admin, err := sql.Open("mysql", driverDSN(u, ""))
	if err != nil {
		return err
	}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		admin.Close()
		return fmt.Errorf("create the bench database: %w", err)
	}
	b.drop = func() {
		_, _ = admin.Exec("DROP DATABASE " + name)
		admin.Close()
	}
	db, err := sql.Open("mysql", driverDSN(u, name))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE contacts (id BIGINT PRIMARY KEY, email VARCHAR(64) NOT NULL,
		first_name VARCHAR(32) NOT NULL, last_name VARCHAR(32) NOT NULL)`); err != nil {
		return err
	}
	// The CSV's contacts, row for row (writeContacts).
	first := []string{"Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Leslie"}
	last := []string{"Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Lamport"}
	for start := 1; start <= b.Records; start += 2000 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO contacts VALUES ")
		for i := start; i <= min(start+1999, b.Records); i++ {
			if i > start {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "(%d, 'contact%07d@example.com', '%s', '%s')", i, i, first[i%10], last[(i/10)%10])
		}
		if _, err := db.ExecContext(ctx, sb.String()); err != nil {
			return fmt.Errorf("load the contacts: %w", err)
		}
	}
	d := *u
	d.Path = "/" + name
	b.dsn = d.String()
	fmt.Fprintf(b.log, "loaded %d contacts into %s.contacts\n", b.Records, name)
	return nil
}

func (b *bench) cleanupSource() {
	if b.drop != nil {
		b.drop()
	}
}

// secondPassReplays is how many records a second pass over the same store
// replays from the ledger: all of the CSV, which is read whole again; none
// of a keyset source, whose next run starts after the last row (it reads
// nothing, as nothing changed).
func (b *bench) secondPassReplays() int64 {
	if b.Source == "mysql" {
		return 0
	}
	return int64(b.Records)
}

// sourceYAML is the sync's source: line.
func (b *bench) sourceYAML() string {
	if b.Source == "mysql" {
		return fmt.Sprintf(`{type: mysql, dsn: "%s", table: contacts, page_size: %d, identity: id}`, b.dsn, b.PageSize)
	}
	return fmt.Sprintf(`{type: csv, path: %s, page_size: %d, identity: id}`, b.csvPath, b.PageSize)
}

func driverDSN(u *url.URL, db string) string {
	cfg := mysqldrv.NewConfig()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, db
	if u.Port() == "" {
		cfg.Addr += ":3306"
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg.FormatDSN()
}
