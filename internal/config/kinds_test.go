package config_test

import (
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/webhook"
)

// kinds are the product's connector kinds, which every config test loads with.
var kinds = connector.Default().Kinds()

// brevoOf and webhookOf are a sync's destination keys.
func brevoOf(x any) *brevo.Config     { return specOf(x).(*brevo.Config) }
func webhookOf(x any) *webhook.Config { return specOf(x).(*webhook.Config) }

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
