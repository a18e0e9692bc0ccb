//! The activity a connection keeps, the deadlines read from it, and the choice of the
//! connection that makes room at the cap.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::activity::Activity;
use super::deadlines::{CLOSE_GRACE, Closed, Policy};
use super::slots::{HOARDING, Roster, VacancyKind};

fn policy() -> Policy {
    Policy {
        http2: false,
        idle: Duration::from_secs(120),
        header_read: Some(Duration::from_secs(5)),
        first_request: Duration::from_secs(10),
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_connection_gets_the_first_request_allowance_then_the_idle_one() {
    let activity = Arc::new(Activity::new());
    activity.serving_http1(Duration::from_secs(5));
    let opened = Instant::now();
    assert_eq!(activity.next_check(policy()), opened + Duration::from_secs(10));
    assert_eq!(activity.expired(policy()), None);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(activity.expired(policy()), Some(Closed::Idle));

    let request = activity.begin();
    assert_eq!(activity.expired(policy()), None, "never while a request runs");
    drop(request);
    let ended = Instant::now();
    assert_eq!(activity.next_check(policy()), ended + Duration::from_secs(120));
    tokio::time::advance(Duration::from_secs(119)).await;
    assert_eq!(activity.expired(policy()), None, "an API server keeps idle connections 90 s");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(activity.expired(policy()), Some(Closed::Idle));
}

#[tokio::test(start_paused = true)]
async fn a_request_head_must_arrive_whole_in_time() {
    let activity = Arc::new(Activity::new());
    activity.serving_http1(Duration::from_secs(5));
    drop(activity.begin());
    tokio::time::advance(Duration::from_secs(30)).await;
    activity.on_read();
    let started = Instant::now();
    assert_eq!(activity.next_check(policy()), started + Duration::from_secs(5));
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(activity.expired(policy()), Some(Closed::HeaderTimeout));
    // Once the head is read the request runs; its end makes the connection idle again.
    drop(activity.begin());
    assert_eq!(activity.expired(policy()), None);
}

#[tokio::test(start_paused = true)]
async fn http2_idles_by_streams_not_bytes() {
    let activity = Arc::new(Activity::new());
    let policy = Policy { idle: Duration::from_secs(60), header_read: None, ..policy() };
    drop(activity.begin());
    tokio::time::advance(Duration::from_secs(30)).await;
    activity.on_read(); // a ping
    assert_eq!(activity.expired(policy), None);
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(activity.expired(policy), Some(Closed::Idle));
}

#[tokio::test(start_paused = true)]
async fn only_a_head_to_cut_before_the_supervisor_looks_wakes_it() {
    let activity = Arc::new(Activity::new());
    activity.serving_http1(Duration::from_secs(5));
    let woken = || {
        let notified = activity.head_begun.notified();
        futures::pin_mut!(notified);
        notified.enable()
    };
    // Requests end and begin while it looks again within the header allowance: no wake.
    activity.will_look_at(Instant::now() + Duration::from_secs(5));
    drop(activity.begin());
    activity.on_read();
    assert!(!woken(), "the supervisor looks in time anyway");
    drop(activity.begin());
    // Idle, it sleeps until the idle deadline: a head begun now must be cut sooner.
    activity.will_look_at(Instant::now() + Duration::from_secs(120));
    activity.on_read();
    assert!(woken());
    assert_eq!(activity.next_check(policy()), Instant::now() + Duration::from_secs(5));
}

fn http1_served() -> Arc<Activity> {
    let activity = Arc::new(Activity::new());
    activity.serving_http1(Duration::from_secs(5));
    drop(activity.begin());
    activity
}

fn http2_served() -> Arc<Activity> {
    let activity = Arc::new(Activity::new());
    drop(activity.begin());
    activity
}

fn asked(activities: &[&Arc<Activity>]) -> Vec<bool> {
    activities.iter().map(|activity| activity.evicting.load(Ordering::Relaxed)).collect()
}

#[tokio::test(start_paused = true)]
async fn room_is_made_by_the_cheapest_connection_one_at_a_time() {
    let roster = Roster::default();
    let older_http1 = http1_served();
    let _l1 = roster.list(&older_http1);
    tokio::time::advance(Duration::from_millis(10)).await;
    let http1 = http1_served();
    let _l2 = roster.list(&http1);
    let http2 = http2_served();
    let l3 = roster.list(&http2);
    let silent = Arc::new(Activity::new());
    let l4 = roster.list(&silent);
    let busy = http2_served();
    let _request = busy.begin();
    let _l5 = roster.list(&busy);
    let all = [&older_http1, &http1, &http2, &silent, &busy];

    roster.make_room(Instant::now());
    assert_eq!(asked(&all), [false; 5], "nothing idle for a second yet");

    tokio::time::advance(HOARDING).await;
    roster.make_room(Instant::now());
    assert_eq!(asked(&all), [false, false, false, true, false], "first, the one that never sent a request");
    roster.make_room(Instant::now());
    assert_eq!(asked(&all), [false, false, false, true, false], "one at a time: it is still leaving");
    assert!(silent.accept_eviction().is_some());
    drop(l4);

    roster.make_room(Instant::now());
    assert_eq!(asked(&all), [false, false, true, true, false], "then idle HTTP/2: GOAWAY");
    drop(l3);

    roster.make_room(Instant::now());
    assert_eq!(asked(&all), [true, false, true, true, false], "then the longest-idle HTTP/1.1");
}

#[tokio::test(start_paused = true)]
async fn a_connection_asked_to_make_room_declines_once_a_request_began() {
    let roster = Roster::default();
    let activity = http1_served();
    let _listed = roster.list(&activity);
    tokio::time::advance(HOARDING).await;
    roster.make_room(Instant::now());
    assert!(activity.leaving());
    // A request arrives before the supervisor acts on the request to leave.
    activity.on_read();
    assert_eq!(activity.accept_eviction(), None, "a request head is arriving");
    assert!(!activity.leaving(), "declined: the accept loop may choose another");
    let request = activity.begin();
    assert_eq!(activity.vacancy(Instant::now() + HOARDING), None, "never while a request runs");
    drop(request);
}

#[tokio::test(start_paused = true)]
async fn a_stalled_request_head_makes_room_like_a_silent_connection() {
    let activity = http1_served();
    tokio::time::advance(Duration::from_secs(30)).await;
    activity.on_read();
    assert_eq!(activity.vacancy(Instant::now()), None, "a head may take a moment");
    tokio::time::advance(HOARDING).await;
    let vacancy = activity.vacancy(Instant::now()).unwrap();
    assert_eq!(vacancy.kind, VacancyKind::StalledHead);
    assert!(vacancy < http1_served().vacancy(Instant::now() + HOARDING).unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_graceful_close_is_cut_once_quiet_for_the_grace() {
    let activity = http2_served();
    let began = Instant::now();
    assert_eq!(activity.close_deadline(began), began + CLOSE_GRACE);
    let request = activity.begin();
    tokio::time::advance(CLOSE_GRACE * 3).await;
    assert!(!activity.close_overdue(began), "a request in flight finishes first");
    drop(request);
    activity.write_blocks();
    tokio::time::advance(CLOSE_GRACE * 3).await;
    assert!(!activity.close_overdue(began), "an answer being written finishes first");
    activity.write_resumes();
    let resumed = Instant::now();
    assert_eq!(activity.close_deadline(began), resumed + CLOSE_GRACE);
    tokio::time::advance(CLOSE_GRACE).await;
    assert!(activity.close_overdue(began));
}
