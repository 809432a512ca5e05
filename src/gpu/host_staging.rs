//! Upload staging buffers in host memory, mapped once for their life (Vulkan).
//!
//! wgpu places a `MAP_WRITE` buffer in device memory the CPU can map where the driver offers
//! it (resizable BAR): the staging writes cross the bus as uncached stores. In host memory
//! the CPU writes at memory speed and the GPU's copy pulls the bytes across the bus, as
//! CUDA's pinned buffers do: faster alone, slower beside kernels on wgpu's one queue
//! ([`super::StagingMemory`] says when each wins). wgpu has no portable way to ask for it, so
//! on Vulkan the buffer is made beneath it and handed to wgpu, which then owns (and frees)
//! buffer and memory; elsewhere, or where the driver refuses, the slots stay wgpu's mapped
//! buffers.

use std::ptr::NonNull;

/// A host-memory buffer's mapping: valid while the `wgpu::Buffer` made with it lives.
pub(super) struct HostMapping {
    start: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; the staging slots hand a slot to one writer at a
// time and write it only while no submitted copy reads it.
unsafe impl Send for HostMapping {}
unsafe impl Sync for HostMapping {}

impl HostMapping {
    /// Copies `piece` to `at` bytes into the mapping.
    ///
    /// # Safety
    /// No submitted copy may read these bytes until the write returns, and no other thread
    /// may write them meanwhile.
    pub(super) unsafe fn write(&self, at: usize, piece: &[u8]) {
        assert!(
            at.checked_add(piece.len())
                .is_some_and(|end| end <= self.len),
            "a staging write past its buffer"
        );
        unsafe {
            self.start
                .as_ptr()
                .add(at)
                .copy_from_nonoverlapping(piece.as_ptr(), piece.len())
        };
    }
}

/// A `COPY_SRC` buffer of `size` bytes in host memory, mapped, or `None` where the backend
/// is not Vulkan or the driver refuses (logged).
pub(super) fn upload_buffer(
    device: &wgpu::Device,
    size: u64,
) -> Option<(wgpu::Buffer, HostMapping)> {
    #[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
    {
        vulkan::upload_buffer(device, size)
    }
    #[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
    {
        let _ = (device, size);
        None
    }
}

#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
mod vulkan {
    use super::HostMapping;
    use ash::vk;
    use std::ptr::NonNull;

    /// The memory type for staging: host-visible and coherent (no flushes), best outside
    /// device memory, then cached (the CPU's copies run at memory speed). Software and
    /// unified-memory drivers have only device-local host-visible types: the path is the
    /// same there, tests run it.
    fn memory_type(properties: &vk::PhysicalDeviceMemoryProperties, allowed: u32) -> Option<u32> {
        let needed = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let types = &properties.memory_types[..properties.memory_type_count as usize];
        (0..types.len() as u32)
            .filter(|&i| allowed & (1 << i) != 0)
            .filter(|&i| types[i as usize].property_flags.contains(needed))
            .max_by_key(|&i| {
                let flags = types[i as usize].property_flags;
                (
                    !flags.contains(vk::MemoryPropertyFlags::DEVICE_LOCAL),
                    flags.contains(vk::MemoryPropertyFlags::HOST_CACHED),
                    std::cmp::Reverse(i),
                )
            })
    }

    pub(super) fn upload_buffer(
        device: &wgpu::Device,
        size: u64,
    ) -> Option<(wgpu::Buffer, HostMapping)> {
        let len = usize::try_from(size).ok()?;
        // SAFETY: the raw device makes, binds and maps one buffer of its own; wgpu takes it
        // whole (`from_raw_managed`) and frees buffer and memory when it is dropped.
        let hal = unsafe { device.as_hal::<wgpu::hal::api::Vulkan>() }?;
        let raw = hal.raw_device();
        let instance = hal.shared_instance().raw_instance();
        let properties =
            unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
        let made = (|| unsafe {
            let info = vk::BufferCreateInfo::default()
                .size(size)
                .usage(vk::BufferUsageFlags::TRANSFER_SRC)
                .sharing_mode(vk::SharingMode::EXCLUSIVE);
            let buffer = raw
                .create_buffer(&info, None)
                .map_err(|e| ("a buffer", e))?;
            let bound = (|| {
                let requirements = raw.get_buffer_memory_requirements(buffer);
                let index = memory_type(&properties, requirements.memory_type_bits).ok_or((
                    "a host-visible memory type",
                    vk::Result::ERROR_FEATURE_NOT_PRESENT,
                ))?;
                let allocation = vk::MemoryAllocateInfo::default()
                    .allocation_size(requirements.size)
                    .memory_type_index(index);
                let memory = raw
                    .allocate_memory(&allocation, None)
                    .map_err(|e| ("host memory", e))?;
                let mapped = raw
                    .bind_buffer_memory(buffer, memory, 0)
                    .and_then(|()| raw.map_memory(memory, 0, vk::WHOLE_SIZE, Default::default()));
                match mapped.ok().and_then(|p| NonNull::new(p.cast::<u8>())) {
                    Some(start) => Ok((memory, start)),
                    None => {
                        raw.free_memory(memory, None);
                        Err(("a mapping", vk::Result::ERROR_MEMORY_MAP_FAILED))
                    }
                }
            })();
            match bound {
                Ok((memory, start)) => Ok((buffer, memory, start)),
                Err(e) => {
                    raw.destroy_buffer(buffer, None);
                    Err(e)
                }
            }
        })();
        let (buffer, memory, start) = match made {
            Ok(made) => made,
            Err((what, e)) => {
                log::warn!("staging in host memory: the driver refused {what} ({e}); staging through wgpu's mapped buffers");
                return None;
            }
        };
        drop(hal);
        let hal_buffer =
            unsafe { wgpu::hal::vulkan::Buffer::from_raw_managed(buffer, memory, 0, size) };
        // SAFETY: the buffer was made on this device with the usage named here.
        let buffer = unsafe {
            device.create_buffer_from_hal::<wgpu::hal::api::Vulkan>(
                hal_buffer,
                &wgpu::BufferDescriptor {
                    label: Some("staging (host memory)"),
                    size,
                    usage: wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                },
            )
        };
        Some((buffer, HostMapping { start, len }))
    }
}
