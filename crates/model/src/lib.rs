//! A model of payouts on one chain, checked with stateright: the domain's decision functions
//! (`opledger_domain::evidence`) driven through every interleaving of attempts, crashes, lost
//! responses, reorganizations, a lying or lagging endpoint and webhooks.
