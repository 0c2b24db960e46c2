package config_test

import (
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/source/file"
	pgsource "github.com/oncesync/oncesync/internal/source/postgres"
)

// kinds are the product's connector kinds, which every config test loads with.
var kinds = connector.Default().Kinds()

// brevoOf and webhookOf are a sync's destination keys.
func brevoOf(x any) *brevo.Config     { return specOf(x).(*brevo.Config) }
func webhookOf(x any) *webhook.Config { return specOf(x).(*webhook.Config) }

func fileOf(x any) *file.Config   { return sourceOf(x).(*file.Config) }
func pgOf(x any) *pgsource.Config { return sourceOf(x).(*pgsource.Config) }

func sourceOf(x any) config.SourceSpec {
	switch v := x.(type) {
	case config.Sync:
		return v.Source.Spec
	case *config.Sync:
		return v.Source.Spec
	}
	panic("sourceOf: not a sync")
}

func specOf(x any) config.DestinationSpec {
	switch v := x.(type) {
	case config.Sync:
		return v.Destination.Spec
	case *config.Sync:
		return v.Destination.Spec
	case config.Destination:
		return v.Spec
	}
	panic("specOf: not a sync or destination")
}
