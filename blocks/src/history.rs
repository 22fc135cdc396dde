//! The CPU side of a stream block's history: kept in the launch's carry, put before the frame
//! in the workspace, the lost frames' zeros shifted in, and the new last samples kept for the
//! next frame (the sizes are the contract's [`History`]).

use kplace_abi::export::{KernelError, Launch};
use kplace_blocks_contract::stream::History;

/// What a CPU stream block does with its [`History`] at each launch.
pub(crate) trait HostHistory {
    /// The workspace holding the history (from the carry, the lost frames' zeros shifted in,
    /// or zeros when not carried) then the frame `x`, and the carry to
    /// [`HostHistory::keep`] into.
    ///
    /// # Safety
    /// The launch's workspace and carry are this launch's alone (the runtime runs a stateful
    /// stage one frame at a time).
    unsafe fn extend<'a>(
        &self,
        launch: &Launch<'a>,
        x: &[f32],
    ) -> Result<(&'a mut [f32], Option<&'a mut [f32]>), KernelError>;

    /// Keeps the last time steps of `extended` in `carry` for the next frame.
    fn keep(&self, carry: Option<&mut [f32]>, extended: &[f32]);
}

impl HostHistory for History {
    unsafe fn extend<'a>(
        &self,
        launch: &Launch<'a>,
        x: &[f32],
    ) -> Result<(&'a mut [f32], Option<&'a mut [f32]>), KernelError> {
        let kept = self.scalars();
        // SAFETY: the caller's contract.
        let extended = unsafe { launch.workspace_slice::<f32>(self.extended_len())? };
        let carry = if self.carried {
            // SAFETY: the caller's contract.
            let carry = unsafe { launch.carry_slice::<f32>(kept)? };
            let shift = self.lost_shift(launch.frames_missing());
            carry.copy_within(shift.., 0);
            carry[kept - shift..].fill(0.0);
            extended[..kept].copy_from_slice(carry);
            Some(carry)
        } else {
            extended[..kept].fill(0.0);
            None
        };
        extended[kept..].copy_from_slice(&x[..self.frame * self.step]);
        Ok((extended, carry))
    }

    fn keep(&self, carry: Option<&mut [f32]>, extended: &[f32]) {
        if let Some(carry) = carry {
            carry.copy_from_slice(&extended[extended.len() - self.scalars()..]);
        }
    }
}
