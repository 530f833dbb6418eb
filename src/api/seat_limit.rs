//! `rooms.seat_actions_per_user_per_sec`: a GCRA per (room, user) on the mic seat commands
//! (`Command::Seat`), bursts of up to one second's worth, checked at the room's owner before
//! anything is paid, queued or written ([`super::rooms::run_command`], the one command path of
//! both edges and of the hop). The key is the user the action is by (whoever sends it: a
//! gateway's service token acting for a user counts against that user); a service acting as
//! itself and the service's own timer commands (`ExpireSeatRequest`, submitted straight to the
//! room service) are not limited. Beyond the limit the command answers 429
//! `seat_rate_limited` with `Retry-After`: a member flapping a seat costs only its own actions
//! (every `RoomSeatsChanged` is a High IM message carrying the whole seat list). Memory stays
//! bounded as [`KeyedRate`] keeps it.

use ::http::StatusCode;

use super::error::ApiError;
use crate::auth::limit::KeyedRate;
use crate::domain::{Actor, Command, RoomId, UserId};
use crate::telemetry::names;

/// One GCRA per (room, user) over the seat commands.
#[derive(Debug)]
pub struct SeatLimiter {
    rate: KeyedRate<(RoomId, UserId)>,
}

impl SeatLimiter {
    /// A limiter of `per_sec` seat actions per second per user and room; `None` for 0 (no
    /// limit).
    pub fn new(per_sec: u32) -> Option<Self> {
        KeyedRate::new(per_sec).map(|rate| Self { rate })
    }

    /// Takes one seat action of `command` in `room_id` from its user's budget; any other
    /// command, and a service's own seat action, is not limited. Refused: 429
    /// `seat_rate_limited` naming the limit, with `Retry-After`.
    pub fn check(&self, room_id: &RoomId, command: &Command) -> Result<(), ApiError> {
        let user = match command {
            Command::Seat { by: Actor::User(user), .. } => user,
            Command::Seat { by: Actor::Service(_), .. } => return Ok(()),
            Command::CreateRoom { .. }
            | Command::JoinRoom { .. }
            | Command::LeaveRoom { .. }
            | Command::SendGift { .. }
            | Command::CloseRoom { .. }
            | Command::SetAdmin { .. }
            | Command::MuteUser { .. }
            | Command::KickUser { .. }
            | Command::UnbanUser { .. }
            | Command::MuteAll { .. }
            | Command::UpdateRoomInfo { .. }
            | Command::SetAttributes { .. }
            | Command::ExpireSeatRequest { .. } => return Ok(()),
        };
        self.rate.check(&(room_id.clone(), user.clone())).map_err(|retry_after| {
            metrics::counter!(names::SEAT_ACTIONS_LIMITED_TOTAL).increment(1);
            let per_sec = self.rate.per_sec();
            let message = format!(
                "more than {per_sec} seat actions per second by this user in this room \
                 (rooms.seat_actions_per_user_per_sec); retry after {} ms; nothing was written",
                retry_after.as_millis()
            );
            let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            let error = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "seat_rate_limited", message);
            ApiError { retry_after: Some(seconds.max(1)), ..error }
        })
    }

    /// (room, user) keys remembered now.
    pub fn len(&self) -> usize {
        self.rate.len()
    }

    /// True when no key is remembered.
    pub fn is_empty(&self) -> bool {
        self.rate.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::domain::SeatAction;

    fn seat(by: Actor) -> Command {
        Command::Seat { by, action: SeatAction::Leave }
    }

    fn user(id: &str) -> Actor {
        Actor::User(UserId::parse(id).unwrap())
    }

    #[test]
    fn each_user_has_its_budget_in_each_room_and_services_none() {
        let limiter = SeatLimiter::new(2).expect("a limit");
        let (r1, r2) = (RoomId::parse("r1").unwrap(), RoomId::parse("r2").unwrap());
        for _ in 0..2 {
            limiter.check(&r1, &seat(user("alice"))).expect("within the burst");
        }
        let refused = limiter.check(&r1, &seat(user("alice"))).expect_err("over the limit");
        assert_eq!((refused.status.as_u16(), &*refused.code), (429, "seat_rate_limited"));
        assert_eq!(refused.retry_after, Some(1), "{}", refused.message);
        assert!(refused.message.contains("rooms.seat_actions_per_user_per_sec"), "{}", refused.message);
        limiter.check(&r2, &seat(user("alice"))).expect("another room is another budget");
        limiter.check(&r1, &seat(user("bob"))).expect("another user is another budget");
        for _ in 0..10 {
            limiter.check(&r1, &seat(Actor::Service("gateway".into()))).expect("a service acting as itself");
            let join = Command::JoinRoom { user_id: UserId::parse("alice").unwrap() };
            limiter.check(&r1, &join).expect("not a seat action");
        }
        assert!(SeatLimiter::new(0).is_none(), "0 is no limit");
    }

    #[test]
    fn many_users_seen_once_are_forgotten_once_their_budget_is_full_again() {
        let limiter = SeatLimiter::new(2).expect("a limit");
        let room = RoomId::parse("r1").unwrap();
        for i in 0..5_000 {
            limiter.check(&room, &seat(user(&format!("u{i}")))).expect("one each");
        }
        assert!(limiter.len() >= 4_000, "remembered while their budget refills: {}", limiter.len());
        std::thread::sleep(Duration::from_millis(1_100));
        for _ in 0..4_096 {
            let _ = limiter.check(&room, &seat(user("flapper")));
        }
        assert!(limiter.len() <= 2, "the idle users are forgotten: {} remembered", limiter.len());
    }
}
