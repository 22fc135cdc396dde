//! Slots for Python kernels. The ABI's `create` is told a stage's configuration but not which
//! kernel of the table it is, so each table entry needs a `create` function of its own: slot
//! `I` has `create_in::<I>`, which creates the kernel claimed into that slot. The other
//! functions are told the state, which knows its kernel, and are shared by every slot.

use std::ffi::{c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use kplace_abi::export::{Config, KernelError, Launch, guarded};
use kplace_abi::{CreateFn, DeviceKind, Kernel, KernelConfig, LaunchArgs, MemorySpace, Status};

use crate::kernel::{Declared, State};

/// The most Python kernels one process declares, over every module it imports.
pub const MAX_KERNELS: usize = 256;

static SLOTS: [OnceLock<Declared>; MAX_KERNELS] = [const { OnceLock::new() }; MAX_KERNELS];
static CLAIMED: AtomicUsize = AtomicUsize::new(0);

macro_rules! creates {
    ($($i:literal)*) => { [$(create_in::<$i> as CreateFn),*] };
}

/// Slot `I`'s `create`.
static CREATES: [CreateFn; MAX_KERNELS] = creates!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15
    16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
    48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
    80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
    96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111
    112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127
    128 129 130 131 132 133 134 135 136 137 138 139 140 141 142 143
    144 145 146 147 148 149 150 151 152 153 154 155 156 157 158 159
    160 161 162 163 164 165 166 167 168 169 170 171 172 173 174 175
    176 177 178 179 180 181 182 183 184 185 186 187 188 189 190 191
    192 193 194 195 196 197 198 199 200 201 202 203 204 205 206 207
    208 209 210 211 212 213 214 215 216 217 218 219 220 221 222 223
    224 225 226 227 228 229 230 231 232 233 234 235 236 237 238 239
    240 241 242 243 244 245 246 247 248 249 250 251 252 253 254 255
);

/// Gives `declared` the next slot, and returns its table entry.
pub fn claim(declared: Declared) -> Result<Kernel, KernelError> {
    let slot = CLAIMED.fetch_add(1, Ordering::Relaxed);
    let Some(cell) = SLOTS.get(slot) else {
        return Err(KernelError::invalid(format!(
            "kernel {}: this process already has the most Python kernels it can ({MAX_KERNELS}, over every module it imported)",
            declared.name.to_string_lossy()
        )));
    };
    let entry = Kernel {
        name: declared.name.as_ptr(),
        device: DeviceKind::CPU,
        memory: MemorySpace::HOST,
        n_inputs: declared.n_inputs,
        n_outputs: declared.n_outputs,
        create: Some(CREATES[slot]),
        workspace_bytes: Some(no_workspace),
        launch: Some(launch),
        destroy: Some(destroy),
        flags: declared.flags,
        reserved: 0,
        carry_bytes: Some(carry_bytes),
    };
    // The slot is this call's alone (the counter only grows); the name's bytes move with the
    // CString, so the pointer above stays valid.
    cell.set(declared)
        .map_err(|_| KernelError::internal("a Python kernel slot was claimed twice"))?;
    Ok(entry)
}

unsafe extern "C" fn create_in<const I: usize>(
    config: *const KernelConfig,
    state: *mut *mut c_void,
    error: *mut c_char,
    error_len: usize,
) -> Status {
    // SAFETY: the runtime passes a valid config, state slot and error buffer (ABI contract).
    unsafe {
        guarded(error, error_len, None, || {
            let declared = SLOTS[I]
                .get()
                .ok_or_else(|| KernelError::internal("create called on an empty slot"))?;
            if config.is_null() || state.is_null() {
                return Err(KernelError::invalid(
                    "create called with a null config or state",
                ));
            }
            let config = Config::from_raw(&*config)?;
            let created = State::create(declared, &config)?;
            *state = Box::into_raw(Box::new(created)).cast();
            Ok(())
        })
    }
}

unsafe extern "C" fn no_workspace(_state: *const c_void) -> u64 {
    0
}

unsafe extern "C" fn carry_bytes(state: *const c_void) -> u64 {
    if state.is_null() {
        return 0;
    }
    // SAFETY: a non-null state came from create_in and is not yet destroyed.
    unsafe { &*state.cast::<State>() }.carry_bytes()
}

unsafe extern "C" fn launch(
    state: *mut c_void,
    args: *const LaunchArgs,
    error: *mut c_char,
    error_len: usize,
) -> Status {
    // SAFETY: the runtime passes a state from create_in, valid args and an error buffer.
    unsafe {
        guarded(error, error_len, None, || {
            if state.is_null() || args.is_null() {
                return Err(KernelError::invalid(
                    "launch called with a null state or args",
                ));
            }
            (*state.cast::<State>()).launch(&Launch::from_raw(&*args))
        })
    }
}

unsafe extern "C" fn destroy(state: *mut c_void) {
    if !state.is_null() {
        // A panicking drop is caught and the state leaked: nothing unwinds across the ABI.
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: a non-null state came from create_in (a Box) and is destroyed once.
            drop(unsafe { Box::from_raw(state.cast::<State>()) })
        }));
    }
}
