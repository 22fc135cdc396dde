//! `kplace plan`'s text: stages, edges with their memory, transfers, streams and fences,
//! pools, executor settings.

use std::fmt;

use super::gpu_path::{ChainCallback, Delivery, GpuPath};
use super::{
    Direction, GpuWork, Lifetime, Plan, PlannedStage, PoolPurpose, StageOn, TileOrigin, human_bytes,
};
use crate::model::graph::{Producer, StageId};
use crate::model::placement::Device;

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.graph;
        writeln!(f, "graph      {} ({})", g.name, g.path.display())?;
        writeln!(
            f,
            "placement  {} ({})",
            self.placement.name,
            self.placement.path.display()
        )?;
        if !self.placement.alternatives.is_empty() {
            let listed: Vec<String> = (self.placement.alternatives.iter())
                .map(|a| a.display().to_string())
                .collect();
            writeln!(
                f,
                "adapts to  {} (kplace run --budget moves the stream there)",
                listed.join(", ")
            )?;
        }
        let dims: Vec<String> = g.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(f, "dims       {}", dims.join(" "))?;
        if let Some(cause) = &self.gpu_unusable {
            writeln!(
                f,
                "\nnote       no GPU is usable here ({cause}): GPU kernels were found but not \
                 created, their workspaces are unknown, and `kplace run` refuses this plan"
            )?;
        }
        self.fmt_stages(f)?;
        self.fmt_edges(f)?;
        self.fmt_transfers(f)?;
        self.fmt_gpu_order(f)?;
        self.fmt_gpu_paths(f)?;
        self.fmt_pools(f)?;
        let pinning = if self.runtime.pin_cores.is_empty() {
            "not pinned".to_string()
        } else {
            format!("pinned to cores {:?}", self.runtime.pin_cores)
        };
        writeln!(
            f,
            "\nexecutor   {} ({} of pools), {} CPU worker{}, {pinning}",
            self.runtime.describe_slots(),
            human_bytes(self.pool_bytes()),
            self.runtime.workers,
            if self.runtime.workers == 1 { "" } else { "s" }
        )
    }
}

impl Plan {
    fn stage_name(&self, id: StageId) -> &str {
        &self.graph.stage(id).name
    }

    fn fmt_stages(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "\nstages")?;
        for p in &self.stages {
            let s = self.graph.stage(p.stage);
            let lib = p.kernel.library();
            let split = match (s.split, p.tile_origin) {
                (Some(split), Some(TileOrigin::Graph)) | (Some(split), None) => format!(
                    "{} tiles of {} along axis {}",
                    p.launches, split.tile, split.axis
                ),
                (Some(split), Some(origin)) => format!(
                    "{} tiles of {} along axis {} ({origin})",
                    p.launches, split.tile, split.axis
                ),
                (None, _) => "whole frame".into(),
            };
            writeln!(
                f,
                "  {:<12} {:<18} {:<6} {} ({})",
                s.name,
                s.kernel,
                p.device().to_string(),
                lib.name(),
                lib.path().display()
            )?;
            let workspace = match p.workspace_bytes {
                Some(bytes) => human_bytes(bytes),
                None => "unknown (kernel not created)".into(),
            };
            writeln!(f, "  {:<12} {split}, workspace {workspace} per launch", "")?;
            if let Some(carry) = p.carry {
                writeln!(
                    f,
                    "  {:<12} stateful: one frame at a time, in frame order (carry {}; a lost frame {})",
                    "",
                    human_bytes(carry.bytes),
                    if carry.reset_on_gap {
                        "resets it"
                    } else {
                        "is passed to the kernel to fill"
                    }
                )?;
            }
        }
        Ok(())
    }

    fn fmt_edges(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = &self.graph;
        writeln!(f, "\nedges")?;
        for e in &self.edges {
            let t = g.tensor(e.tensor);
            let from = match t.producer {
                Producer::Source => "source".to_string(),
                Producer::Stage(s) => self.stage_name(s).to_string(),
                Producer::Constant => match g.constant(e.tensor) {
                    Some(c) => format!("constant {}", c.path.display()),
                    None => "constant".to_string(),
                },
            };
            let mut to: Vec<String> = g
                .consumers(e.tensor)
                .map(|s| self.stage_name(s).to_string())
                .collect();
            if g.sinks.contains(&e.tensor) {
                to.push("sink".into());
            }
            let memory = match e.mirror {
                Some(m) => format!("{} + {}", e.space, m.space),
                None => e.space.to_string(),
            };
            writeln!(
                f,
                "  {:<12} {:<22} {:>10}  {} -> {}  [{memory}]",
                t.name,
                format!("{}{:?}", t.dtype.name().unwrap_or("?"), t.shape),
                human_bytes(t.bytes),
                from,
                to.join(", "),
            )?;
        }
        Ok(())
    }

    fn fmt_transfers(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for edge in self.edges.iter().filter(|e| e.lifetime == Lifetime::Run) {
            if let Some(m) = edge.mirror {
                writeln!(
                    f,
                    "\nconstant {} ({}) uploaded once, {} -> {}, before the first frame",
                    self.graph.tensor(edge.tensor).name,
                    human_bytes(m.transfer.bytes),
                    edge.space,
                    m.space
                )?;
            }
        }
        let mut transfers = self.transfers().peekable();
        if transfers.peek().is_none() {
            return match self.edges.iter().all(|e| e.mirror.is_none()) {
                true => writeln!(
                    f,
                    "\ntransfers  none: every stage runs on the CPU, every buffer is in host memory"
                ),
                false => writeln!(f, "\ntransfers  none per frame"),
            };
        }
        writeln!(f, "\ntransfers (per frame)")?;
        for (edge, t) in transfers {
            let tensor = &self.graph.tensor(edge.tensor).name;
            // A transfer always copies a tensor's home into its mirror.
            let from = edge.space;
            let to = edge.mirror.map(|m| m.space.to_string()).unwrap_or_default();
            let pieces = if t.pieces > 1 {
                format!(
                    ", in {} pieces of {} as their packets arrive",
                    t.pieces,
                    human_bytes(t.bytes / t.pieces)
                )
            } else {
                String::new()
            };
            let when = match t.direction {
                Direction::HostToDevice => "before its launches",
                Direction::DeviceToHost => "after its launches, before its event",
            };
            writeln!(
                f,
                "  {} {:<12} {:>10}  {from} -> {to}  on {}'s stream {when}{pieces}",
                t.direction,
                tensor,
                human_bytes(t.bytes),
                self.stage_name(t.stage),
            )?;
        }
        Ok(())
    }

    fn fmt_gpu_order(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gpu_stages: Vec<(&PlannedStage, i32, &GpuWork)> = (self.stages.iter())
            .filter_map(|s| match &s.on {
                StageOn::Gpu { priority, work, .. } => Some((s, *priority, work)),
                StageOn::Cpu => None,
            })
            .collect();
        if gpu_stages.is_empty() {
            return Ok(());
        }
        writeln!(f, "\nstreams (one per GPU stage and slot, non-blocking)")?;
        for (p, priority, _) in &gpu_stages {
            writeln!(
                f,
                "  {:<12} {:<6} priority {:>2}, {} streams",
                self.stage_name(p.stage),
                p.device().to_string(),
                priority,
                self.runtime.slots
            )?;
        }
        writeln!(
            f,
            "\nfences (one event per GPU stage and slot, timing disabled; without a graph)"
        )?;
        for (p, _, work) in &gpu_stages {
            let name = self.stage_name(p.stage);
            for &t in &work.waits {
                let writer = match self.graph.tensor(t).producer {
                    Producer::Stage(s) => self.stage_name(s),
                    Producer::Source => "source",
                    Producer::Constant => "constant",
                };
                writeln!(
                    f,
                    "  {name} waits on {writer}'s event before reading {} (stream wait, no host block)",
                    self.graph.tensor(t).name
                )?;
            }
            let host_readers: Vec<String> = self
                .graph
                .stage(p.stage)
                .outputs
                .iter()
                .flat_map(|&t| self.graph.consumers(t))
                .filter(|&s| self.stages[s.0].device() == Device::Cpu)
                .map(|s| self.stage_name(s).to_string())
                .collect();
            let after = if host_readers.is_empty() {
                "the frame's completion".to_string()
            } else {
                format!("{} and the frame's completion", host_readers.join(", "))
            };
            writeln!(
                f,
                "  {name} records its event after its launches{}; a host callback then releases {after}",
                if work.downloads.is_empty() {
                    ""
                } else {
                    " and downloads"
                }
            )?;
        }
        Ok(())
    }

    /// Which path each GPU stage takes per frame, and what a frame costs the host, for a
    /// replay's whole frames and for a stream's packets.
    fn fmt_gpu_paths(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.stages.iter().any(|s| s.gpu().is_some()) {
            return Ok(());
        }
        writeln!(
            f,
            "\nper frame on the GPU (kplace run --profile-gpu: every stage on its own stream)"
        )?;
        if self.gpu_unusable.is_some() {
            writeln!(
                f,
                "  (kernels not created here: a stateful one would take the path without graphs)"
            )?;
        }
        for (delivery, how) in [
            (Delivery::Frames, "closed loop (a replay)"),
            (Delivery::Packets, "streamed (packets as they arrive)"),
        ] {
            let path = GpuPath::new(self, delivery, false);
            let calls = path.per_frame(self, false);
            let staging = match (&path.not_staged, delivery) {
                (_, Delivery::Packets) => String::new(),
                (None, _) => ": whole frames staged once in pinned memory".into(),
                (Some(why), _) => {
                    format!(": frames written into the slot packet by packet ({why})")
                }
            };
            let plural = |n: u64| if n == 1 { "" } else { "s" };
            writeln!(
                f,
                "  {how}{staging}; {} driver call{} and {} host callback{} per frame",
                calls.driver_calls,
                plural(calls.driver_calls),
                calls.callbacks,
                plural(calls.callbacks)
            )?;
            self.fmt_gpu_path(f, &path)?;
        }
        Ok(())
    }

    fn fmt_gpu_path(&self, f: &mut fmt::Formatter<'_>, path: &GpuPath) -> fmt::Result {
        let Some(chain) = &path.chain else {
            if let Some(why) = &path.no_graph {
                writeln!(f, "    no graph: {why}")?;
            }
            for p in self.stages.iter().filter(|s| s.gpu().is_some()) {
                let how = if path.streams(self, p.stage) {
                    "tile by tile as its packets complete"
                } else {
                    "once its inputs are complete"
                };
                writeln!(
                    f,
                    "    {:<12} on its own stream, {how}: its waits, uploads, launches, \
                     downloads, event and host callback",
                    self.stage_name(p.stage)
                )?;
            }
            return Ok(());
        };
        if let Some(t) = chain.tiles {
            let then = match &chain.tiles_callback {
                Some(cb) => format!(", then {}", self.callback_text(cb)),
                None => String::new(),
            };
            writeln!(
                f,
                "    {:<12} tile by tile as its packets complete (an upload and a launch each){then}",
                self.stage_name(t)
            )?;
        }
        for (i, &s) in chain.graph.iter().enumerate() {
            let mut what = String::from("in the slot's graph, launched with one call");
            if i > 0 {
                what = String::from("in the slot's graph");
            } else if path.staged && super::gpu_path::reads_source(self, s) {
                what += " after its samples' upload from the staged frame";
            }
            for (_, cb) in chain.callbacks.iter().filter(|(after, _)| *after == i) {
                what += &format!(", then {}", self.callback_text(cb));
            }
            writeln!(f, "    {:<12} {what}", self.stage_name(s))?;
        }
        Ok(())
    }

    /// `a host callback releasing cluster and the frame`.
    fn callback_text(&self, callback: &ChainCallback) -> String {
        let mut released: Vec<String> = Vec::new();
        for &s in &callback.finishes {
            for &t in &self.graph.stage(s).outputs {
                for reader in self.graph.consumers(t) {
                    let name = self.stage_name(reader).to_string();
                    if self.stages[reader.0].device() == Device::Cpu && !released.contains(&name) {
                        released.push(name);
                    }
                }
            }
        }
        if callback.ends_task {
            released.push("the frame".into());
        }
        format!("a host callback releasing {}", released.join(" and "))
    }

    fn fmt_pools(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\npools ({} slots in flight, allocated at start)",
            self.runtime.slots
        )?;
        for p in &self.pools {
            // Whose the blocks are, where it is not simply one per slot.
            let whose = match p.purpose {
                PoolPurpose::Tensor(t) if self.edges[t.0].lifetime == Lifetime::Stages => {
                    "  shared: bound to a frame while its stages run"
                }
                PoolPurpose::Workspace(s) if self.stages[s.0].device() == Device::Cpu => {
                    "  one per worker"
                }
                PoolPurpose::Workspace(_) => "  one per launch, per slot",
                PoolPurpose::Carry(_) => "  kept from frame to frame",
                PoolPurpose::Tensor(t) | PoolPurpose::Mirror(t)
                    if self.edges[t.0].lifetime == Lifetime::Run =>
                {
                    "  constant: filled before the first frame"
                }
                PoolPurpose::CarryZeros(_) => "  zeros to start the carry afresh",
                PoolPurpose::CarryStaging(_) => "  the carry on its way between placements",
                _ => "",
            };
            writeln!(
                f,
                "  {:<24} {:<15} {:>3} x {:>10} = {:>10}{whose}",
                p.name,
                p.space.to_string(),
                p.blocks,
                human_bytes(p.block_bytes),
                human_bytes(p.total_bytes())
            )?;
        }
        writeln!(
            f,
            "  {:<24} {:>47}",
            "total",
            human_bytes(self.pool_bytes())
        )
    }
}
