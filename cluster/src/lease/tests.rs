use std::time::Duration;

use super::*;
use crate::ids::ControllerEpoch;

fn config(identity: &str) -> CampaignConfig {
    CampaignConfig::new(identity, Duration::from_secs(15), Duration::from_secs(2))
}

fn at(ms: u64) -> MonotonicTime {
    MonotonicTime::from_millis(ms)
}

fn lease(version: &str, holder: Option<&str>, epoch: u64) -> ObservedLease<()> {
    ObservedLease {
        resource_version: version.to_owned(),
        holder: holder.map(str::to_owned),
        epoch: ControllerEpoch(epoch),
        duration: Duration::from_secs(15),
        heartbeat_endpoint: holder.map(|h| format!("{h}.kaas:9094")),
        body: (),
    }
}

fn requests(actions: &[Action<()>]) -> Vec<Request<()>> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send(request) => Some(request.clone()),
            Action::Publish(_) => None,
        })
        .collect()
}

/// The events published, but the epochs (see [`epochs`]).
fn events(actions: &[Action<()>]) -> Vec<Event> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Publish(Event::Epoch(_)) => None,
            Action::Publish(event) => Some(event.clone()),
            Action::Send(_) => None,
        })
        .collect()
}

/// The epochs published.
fn epochs(actions: &[Action<()>]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Publish(Event::Epoch(epoch)) => Some(epoch.0),
            _ => None,
        })
        .collect()
}

/// A campaign of `identity` that has just acquired `version` at `epoch`, sent at 0 ms.
fn leader(identity: &str, version: &str, epoch: u64) -> Campaign<()> {
    let mut campaign = Campaign::new(config(identity), at(0));
    assert_eq!(requests(&campaign.tick(at(0))), [Request::Read]);
    let actions = campaign.step(at(10), Input::Answer(Answer::Read(None)));
    assert_eq!(
        requests(&actions),
        [Request::Acquire {
            base: None,
            floor: ControllerEpoch(0)
        }]
    );
    campaign.step(
        at(20),
        Input::Answer(Answer::Written(lease(version, Some(identity), epoch))),
    );
    assert!(campaign.is_leading());
    campaign
}

#[test]
fn the_deadline_leaves_one_renew_period_before_others_may_take_over() {
    let config = config("kaas-0");
    let sent = at(1_000);
    assert_eq!(config.deadline_after(sent), at(14_000));
    assert_eq!(config.request_timeout(), Duration::from_millis(7_500));
    let short = CampaignConfig::new(
        "kaas-0",
        Duration::from_millis(1_000),
        Duration::from_millis(250),
    );
    assert_eq!(
        short.holder_silence,
        Duration::from_millis(62) + Duration::from_micros(500)
    );
    assert_eq!(config.holder_silence, Duration::from_millis(500));
    assert_eq!(short.deadline_after(sent), at(1_750));
    assert_eq!(short.request_timeout(), Duration::from_secs(1));
}

#[test]
fn a_version_held_by_another_is_free_one_duration_after_it_was_first_seen() {
    let seen = at(5_000);
    let sighting = |holder: Option<&str>| Sighting {
        resource_version: "41".into(),
        since: seen,
        holder: holder.map(str::to_owned),
        duration: Duration::from_secs(15),
        heartbeat_endpoint: None,
    };
    assert_eq!(sighting(Some("kaas-0")).free_at("kaas-1"), at(20_000));
    // Free, or this pod's own from an earlier run: at once.
    assert_eq!(sighting(None).free_at("kaas-1"), seen);
    assert_eq!(sighting(Some("kaas-1")).free_at("kaas-1"), seen);
}

#[test]
fn a_new_lease_is_created_and_its_deadline_counts_from_the_send() {
    let mut campaign = Campaign::new(config("kaas-1"), at(0));
    campaign.tick(at(0));
    campaign.step(at(10), Input::Answer(Answer::Read(None)));
    let actions = campaign.step(
        at(50),
        Input::Answer(Answer::Written(lease("7", Some("kaas-1"), 1))),
    );
    assert_eq!(
        events(&actions),
        [
            Event::Acquired {
                epoch: ControllerEpoch(1),
                renew_deadline: at(10 + 13_000),
                expired_holder: None,
            },
            Event::Holder(Some("kaas-1.kaas:9094".into())),
        ]
    );
}

#[test]
fn a_lease_held_by_another_is_taken_over_only_after_it_went_unchanged_for_its_duration() {
    let mut campaign = Campaign::new(config("kaas-1"), at(0));
    campaign.tick(at(0));
    let actions = campaign.step(
        at(30),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    assert_eq!(
        events(&actions),
        [Event::Holder(Some("kaas-0.kaas:9094".into()))]
    );
    assert!(requests(&actions).is_empty(), "held: {actions:?}");
    // Seen when the answer came (30 ms): free at 15.03 s; the next renew-period round first.
    assert_eq!(campaign.next_wake(), Some(at(2_000)));
    for now in (2_000..15_000).step_by(2_000) {
        assert_eq!(requests(&campaign.tick(at(now))), [Request::Read]);
        campaign.step(
            at(now + 10),
            Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
        );
    }
    assert_eq!(campaign.next_wake(), Some(at(15_030)), "the free-at wake");
    assert_eq!(requests(&campaign.tick(at(15_030))), [Request::Read]);
    let actions = campaign.step(
        at(15_040),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    assert_eq!(
        requests(&actions),
        [Request::Acquire {
            base: Some(lease("3", Some("kaas-0"), 4)),
            floor: ControllerEpoch(0)
        }]
    );
    let actions = campaign.step(
        at(15_070),
        Input::Answer(Answer::Written(lease("9", Some("kaas-1"), 5))),
    );
    assert_eq!(
        events(&actions)[0],
        Event::Acquired {
            epoch: ControllerEpoch(5),
            renew_deadline: at(15_040 + 13_000),
            expired_holder: Some("kaas-0".into()),
        }
    );
}

#[test]
fn a_watched_change_restarts_the_expiry_clock_and_the_earlier_sighting_stands() {
    let mut campaign = Campaign::new(config("kaas-1"), at(0));
    campaign.tick(at(0));
    campaign.step(
        at(10),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    // The same version again later keeps its first sighting (the read's answer).
    campaign.step(at(1_000), Input::Watched(lease("3", Some("kaas-0"), 4)));
    assert_eq!(campaign.sighting().map(|s| s.since), Some(at(10)));
    // A renewal seen at 1.5 s: free at 16.5 s.
    campaign.step(at(1_500), Input::Watched(lease("4", Some("kaas-0"), 4)));
    assert_eq!(
        campaign.sighting().map(|s| s.free_at("kaas-1")),
        Some(at(16_500))
    );
}

#[test]
fn own_or_free_leases_are_taken_at_once_and_a_lease_of_its_own_name_is_no_expired_holder() {
    for holder in [None, Some("kaas-1")] {
        let mut campaign = Campaign::new(config("kaas-1"), at(0));
        campaign.tick(at(0));
        let actions = campaign.step(
            at(10),
            Input::Answer(Answer::Read(Some(lease("3", holder, 4)))),
        );
        assert_eq!(
            requests(&actions),
            [Request::Acquire {
                base: Some(lease("3", holder, 4)),
                floor: ControllerEpoch(0)
            }]
        );
        let actions = campaign.step(
            at(20),
            Input::Answer(Answer::Written(lease("5", Some("kaas-1"), 5))),
        );
        assert!(matches!(
            events(&actions)[0],
            Event::Acquired {
                expired_holder: None,
                ..
            }
        ));
    }
}

#[test]
fn a_leader_renews_every_period_keeps_its_deadline_on_failure_and_loses_on_conflict() {
    let mut campaign = leader("kaas-0", "5", 1);
    assert_eq!(campaign.next_wake(), Some(at(2_000)));
    assert_eq!(
        requests(&campaign.tick(at(2_000))),
        [Request::Renew {
            held: lease("5", Some("kaas-0"), 1)
        }]
    );
    let actions = campaign.step(
        at(2_100),
        Input::Answer(Answer::Written(lease("6", Some("kaas-0"), 1))),
    );
    assert_eq!(
        events(&actions),
        [Event::Renewed {
            renew_deadline: at(15_000)
        }]
    );
    campaign.tick(at(4_000));
    assert!(events(&campaign.step(at(11_500), Input::Answer(Answer::Failed))).is_empty());
    assert!(campaign.is_leading());
    // The round missed while the request hung comes at once, then on a fresh cadence.
    assert_eq!(campaign.next_wake(), Some(at(6_000)));
    campaign.tick(at(11_500));
    assert_eq!(campaign.next_wake(), None);
    let actions = campaign.step(
        at(11_600),
        Input::Answer(Answer::Conflict(Some(lease("8", Some("kaas-2"), 2)))),
    );
    assert_eq!(
        events(&actions),
        [Event::Lost, Event::Holder(Some("kaas-2.kaas:9094".into()))]
    );
    assert!(!campaign.is_leading());
    assert_eq!(campaign.next_wake(), Some(at(13_500)));
}

#[test]
fn a_release_clears_the_lease_and_keeps_the_broker_quiet_for_one_duration() {
    let mut campaign = leader("kaas-0", "5", 3);
    // Another epoch than the one held: nothing.
    assert!(campaign
        .step(at(100), Input::Release(ControllerEpoch(2)))
        .is_empty());
    let actions = campaign.step(at(100), Input::Release(ControllerEpoch(3)));
    assert_eq!(
        requests(&actions),
        [Request::Release {
            held: lease("5", Some("kaas-0"), 3)
        }]
    );
    assert!(!campaign.is_leading());
    let actions = campaign.step(at(120), Input::Answer(Answer::Written(lease("6", None, 3))));
    assert_eq!(
        events(&actions),
        [
            Event::Released {
                epoch: ControllerEpoch(3)
            },
            Event::Holder(None)
        ]
    );
    // Free at once by its fields, but quiet until 15.1 s: rounds read and do not acquire.
    assert_eq!(campaign.next_wake(), Some(at(2_000)));
    campaign.tick(at(2_000));
    let actions = campaign.step(
        at(2_010),
        Input::Answer(Answer::Read(Some(lease("6", None, 3)))),
    );
    assert!(requests(&actions).is_empty());
    assert_eq!(
        campaign.tick(at(15_100)),
        [Action::Send(Request::Read)],
        "the quiet time's end wakes it"
    );
    let actions = campaign.step(
        at(15_110),
        Input::Answer(Answer::Read(Some(lease("6", None, 3)))),
    );
    assert_eq!(
        requests(&actions),
        [Request::Acquire {
            base: Some(lease("6", None, 3)),
            floor: ControllerEpoch(0)
        }]
    );
}

#[test]
fn a_take_over_re_acquires_the_held_lease_above_the_floor() {
    let mut campaign = leader("kaas-0", "5", 3);
    let actions = campaign.step(at(100), Input::TakeOverAbove(ControllerEpoch(9)));
    assert_eq!(
        requests(&actions),
        [Request::Acquire {
            base: Some(lease("5", Some("kaas-0"), 3)),
            floor: ControllerEpoch(9)
        }]
    );
    // A release asked for meanwhile waits for the answer, then finds the new epoch.
    assert!(campaign
        .step(at(110), Input::Release(ControllerEpoch(10)))
        .is_empty());
    let actions = campaign.step(
        at(150),
        Input::Answer(Answer::Written(lease("6", Some("kaas-0"), 10))),
    );
    assert_eq!(
        events(&actions)[0],
        Event::Acquired {
            epoch: ControllerEpoch(10),
            renew_deadline: at(13_100),
            expired_holder: None,
        }
    );
    assert_eq!(
        requests(&actions),
        [Request::Release {
            held: lease("6", Some("kaas-0"), 10)
        }]
    );
    // A follower has nothing to take over.
    let mut follower: Campaign<()> = Campaign::new(config("kaas-1"), at(0));
    assert!(follower
        .step(at(0), Input::TakeOverAbove(ControllerEpoch(9)))
        .is_empty());
}

#[test]
fn a_version_read_is_dated_from_the_answer_not_the_send() {
    // The read is sent at 0 and reaches the API server at 2.9 s, just after the holder's
    // renewal (sent at 2.5 s, deadline 15.5 s) made version 8; the answer arrives at 3 s.
    // Dated from the send, version 8 would be free at 15 s, before the holder's deadline.
    let mut campaign = Campaign::new(config("kaas-1"), at(0));
    assert_eq!(requests(&campaign.tick(at(0))), [Request::Read]);
    campaign.step(
        at(3_000),
        Input::Answer(Answer::Read(Some(lease("8", Some("kaas-0"), 4)))),
    );
    assert_eq!(campaign.sighting().map(|s| s.since), Some(at(3_000)));
    assert_eq!(
        campaign.sighting().map(|s| s.free_at("kaas-1")),
        Some(at(18_000))
    );
}

#[test]
fn a_version_a_release_conflicts_with_is_dated_from_the_answer() {
    let mut campaign = leader("kaas-0", "5", 3);
    campaign.step(at(100), Input::Release(ControllerEpoch(3)));
    // Someone else's version, written after the release was sent.
    campaign.step(
        at(4_000),
        Input::Answer(Answer::Conflict(Some(lease("9", Some("kaas-2"), 4)))),
    );
    assert_eq!(campaign.sighting().map(|s| s.since), Some(at(4_000)));
}

#[test]
fn every_observed_version_publishes_its_epoch() {
    let mut campaign = Campaign::new(config("kaas-1"), at(0));
    campaign.tick(at(0));
    let read = campaign.step(
        at(10),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    assert_eq!(epochs(&read), [4]);
    let watched = campaign.step(at(20), Input::Watched(lease("4", Some("kaas-2"), 5)));
    assert_eq!(epochs(&watched), [5]);
    assert!(epochs(&campaign.step(at(30), Input::WatchedDeleted)).is_empty());
    // A leader learns the epoch it wrote, and the one a conflict shows.
    let mut leader = leader("kaas-0", "5", 3);
    assert_eq!(
        requests(&leader.tick(at(2_000))),
        [Request::Renew {
            held: lease("5", Some("kaas-0"), 3)
        }]
    );
    let lost = leader.step(
        at(2_010),
        Input::Answer(Answer::Conflict(Some(lease("8", Some("kaas-2"), 4)))),
    );
    assert_eq!(epochs(&lost), [4]);
    assert_eq!(events(&lost)[0], Event::Lost);
}

fn down(endpoint: &str, since: u64, not_ready: bool) -> Input<()> {
    Input::Holder(HolderSignal {
        endpoint: endpoint.to_owned(),
        down_since: Some(at(since)),
        not_ready,
    })
}

/// A follower of `kaas-1` that read version 3 held by `kaas-0` (epoch 4) at 10 ms.
fn follower_of_kaas_0() -> Campaign<()> {
    let mut campaign = Campaign::new(config("kaas-1"), at(0));
    campaign.tick(at(0));
    campaign.step(
        at(10),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    campaign
}

#[test]
fn a_holder_whose_stream_broke_and_that_is_not_ready_is_taken_over_at_once() {
    let mut campaign = follower_of_kaas_0();
    campaign.step(at(1_000), down("kaas-0.kaas:9094", 900, true));
    assert_eq!(
        campaign.next_wake(),
        Some(at(900)),
        "due since the stream broke"
    );
    assert_eq!(requests(&campaign.tick(at(1_000))), [Request::Read]);
    let actions = campaign.step(
        at(1_010),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    // Compare-and-swap on the version read, long before it expires (15 s).
    assert_eq!(
        requests(&actions),
        [Request::Acquire {
            base: Some(lease("3", Some("kaas-0"), 4)),
            floor: ControllerEpoch(0)
        }]
    );
    let actions = campaign.step(
        at(1_030),
        Input::Answer(Answer::Written(lease("4", Some("kaas-1"), 5))),
    );
    assert_eq!(
        events(&actions)[0],
        Event::Acquired {
            epoch: ControllerEpoch(5),
            renew_deadline: at(1_010 + 13_000),
            expired_holder: Some("kaas-0".into()),
        }
    );
}

#[test]
fn a_ready_holder_is_taken_over_only_after_its_stream_stayed_down_for_the_silence() {
    let mut campaign = follower_of_kaas_0();
    campaign.step(at(1_000), down("kaas-0.kaas:9094", 1_000, false));
    assert_eq!(campaign.next_wake(), Some(at(1_500)));
    // The stream comes back first: nothing to do but the renew-period round.
    campaign.step(
        at(1_200),
        Input::Holder(HolderSignal {
            endpoint: "kaas-0.kaas:9094".into(),
            down_since: None,
            not_ready: false,
        }),
    );
    assert_eq!(campaign.next_wake(), Some(at(2_000)));
    campaign.step(at(1_300), down("kaas-0.kaas:9094", 1_300, false));
    assert_eq!(requests(&campaign.tick(at(1_800))), [Request::Read]);
    let actions = campaign.step(
        at(1_810),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    assert_eq!(requests(&actions).len(), 1, "acquires: {actions:?}");
}

#[test]
fn a_signal_about_another_endpoint_or_a_lost_race_changes_nothing() {
    // A stream to an old holder's endpoint says nothing about the current holder.
    let mut campaign = follower_of_kaas_0();
    campaign.step(at(1_000), down("kaas-2.kaas:9094", 0, true));
    assert_eq!(campaign.next_wake(), Some(at(2_000)));
    // Two brokers race: the loser's compare-and-swap conflicts, and it follows the winner.
    let mut campaign = follower_of_kaas_0();
    campaign.step(at(1_000), down("kaas-0.kaas:9094", 1_000, true));
    campaign.tick(at(1_000));
    campaign.step(
        at(1_010),
        Input::Answer(Answer::Read(Some(lease("3", Some("kaas-0"), 4)))),
    );
    let actions = campaign.step(
        at(1_020),
        Input::Answer(Answer::Conflict(Some(lease("4", Some("kaas-2"), 5)))),
    );
    assert_eq!(
        events(&actions),
        [Event::Holder(Some("kaas-2.kaas:9094".into()))]
    );
    assert!(!campaign.is_leading());
    // The new holder's stream is up: no take-over wake, only the renew-period round.
    assert_eq!(campaign.next_wake(), Some(at(2_000)));
}

#[test]
fn a_leader_that_watches_a_newer_term_of_another_broker_stops_at_once() {
    let mut campaign = leader("kaas-0", "5", 3);
    // A version of its own term (a foreign write) changes nothing.
    let actions = campaign.step(at(100), Input::Watched(lease("6", Some("kaas-0"), 3)));
    assert!(!events(&actions).contains(&Event::Lost));
    // Taken over early while it was paused: its deadline is 13 s away, its term is over.
    let actions = campaign.step(at(200), Input::Watched(lease("7", Some("kaas-2"), 4)));
    assert_eq!(
        events(&actions),
        [Event::Lost, Event::Holder(Some("kaas-2.kaas:9094".into()))]
    );
    assert!(!campaign.is_leading());
}
